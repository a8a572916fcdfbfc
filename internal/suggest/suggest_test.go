package suggest

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	known := []string{"region", "name", "ec2_endpoint"}
	for word, want := range map[string]string{"regoin": "region", "nmae": "name", "ec2-endpoint": "ec2_endpoint", "colour": "", strings.Repeat("a", 100): ""} {
		if got := Closest(word, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance(kitten, sitting) = %d, want 3", d)
	}
}

package harness

import (
	"reflect"
	"testing"
)

func TestParseSqueueOwners(t *testing.T) {
	got := ParseSqueueOwners("7 998 burstuser\n8_0 0 root\n\n9 1234\nx y z\n10 -1 a\n")
	want := []Job{{ID: "7", UID: 998, User: "burstuser"}, {ID: "8_0", UID: 0, User: "root"}, {ID: "9", UID: 1234}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSqueueOwners = %+v, want %+v", got, want)
	}
}

func TestParseJobCompOwners(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []Job
	}{
		{"none", "", nil},
		// jobcomp/filetxt (22.05 form, shortened)
		{"jobcomp", "JobId=3 UserId=burstvic(997) GroupId=burstvic(997) Name=train.sh JobState=COMPLETED Partition=gpu\n",
			[]Job{{ID: "3", UID: 997, User: "burstvic"}}},
		// a uid Slurm cannot name
		{"unknown user", "JobId=4 JobName=a UserId=(null)(1234) GroupId=(null)(1234)\n", []Job{{ID: "4", UID: 1234, User: "(null)"}}},
		// the job's name is the user's text and comes after the owner
		{"name spoofs an owner", "JobId=5 UserId=root(0) Name=UserId=burstuser(998)\n", []Job{{ID: "5", UID: 0, User: "root"}}},
		{"no owner", "JobId=6 JobName=a\n", nil},
		{"bad uid", "JobId=6 UserId=a(x)\nJobId=9 UserId=a(-1)\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseJobCompOwners(c.in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseJobCompOwners(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

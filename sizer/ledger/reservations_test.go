package ledger

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// A Capacity Block is billed once, whole, at its price from burst.yaml,
// from the moment it is bought (scheduled) on, as the emulator bills it;
// one burst.yaml names without a price is not billed and the sync says so.
func TestCapacityBlockPrepaid(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	now := e.emu.Now()
	id, err := e.emu.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 2,
		Start: now.Add(24 * time.Hour), End: now.Add(72 * time.Hour), UpfrontUSD: 4321.5})
	if err != nil {
		t.Fatal(err)
	}
	e.l.o.BlockPrices = map[string]float64{id: 4321.5}
	if _, err := e.sync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	rs, err := e.st.Reservations(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("the ledger's reservations: %+v %v", rs, err)
	}
	var want float64
	for _, b := range e.emu.ReservationBill() {
		if b.ReservationID == id {
			want = b.USD
		}
	}
	secs, usd := rs[0].USD(time.Now())
	if rs[0].ID != id || rs[0].State != "scheduled" || math.Abs(usd-want) > 1e-6 || want != 4321.5 || secs != 48*3600 {
		t.Errorf("the block in the ledger: %+v, $%.6f over %d s; want %s scheduled, $%.2f (EC2's bill) over 48 h", rs[0], usd, secs, id, want)
	}
	// no price: not billed, and the sync says why
	other, err := e.emu.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 1, Start: now, End: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.l.o.BlockPrices[other] = 0
	if _, err := e.sync(ctx); err == nil {
		t.Error("a block without a price synced without an error")
	}
	if rs, _ := e.st.Reservations(ctx); len(rs) != 1 {
		t.Errorf("the block without a price was billed: %+v", rs)
	}
}

package notices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/ec2events"
)

// StatusLister lists EC2's scheduled events of the account's running
// instances (the EC2 provider's ScheduledEvents: DescribeInstanceStatus).
type StatusLister interface {
	ScheduledEvents(ctx context.Context) ([]ec2events.StatusEvent, error)
}

// DefaultStatusPoll is how often the Poller asks by default: EC2 schedules
// its events days ahead and gives at least a few hours' notice.
const DefaultStatusPoll = 5 * time.Minute

// PollOptions configure a Poller.
type PollOptions struct {
	// Interval between passes (Run); default DefaultStatusPoll.
	Interval time.Duration
	// Fence, when set, is asked before each pass (sizer/store's Fence:
	// whether this sizer still leads); on an error the pass acts on
	// nothing, so a deposed leader evacuates no node the new one handles.
	Fence      func(context.Context) error
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Poller finds EC2's scheduled events by DescribeInstanceStatus, so they
// are acted on without EventBridge (no interruption queue, a lost AWS
// Health event), through the same Scheduled as the queue's events: an
// event both report is acted on once.
type Poller struct {
	list  StatusLister
	sched *Scheduled
	o     PollOptions
	log   *slog.Logger
	count *prometheus.CounterVec
}

// NewPoller returns a Poller.
func NewPoller(l StatusLister, s *Scheduled, o PollOptions) (*Poller, error) {
	if l == nil || s == nil {
		return nil, errors.New("creating the scheduled-event poller: the lister and the handler are both required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultStatusPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Poller{list: l, sched: s, o: o, log: o.Logger.With("component", "scheduled-events"),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_scheduled_events_polled_total",
			Help: "EC2 scheduled events found by polling DescribeInstanceStatus, by what burst-sizer did (the outcomes of burst_sizer_ec2_events_total; duplicate: already acted on from either source)."}, []string{"outcome"})}
	if o.Registerer != nil {
		if err := o.Registerer.Register(p.count); err != nil {
			return nil, fmt.Errorf("creating the scheduled-event poller: %w", err)
		}
	}
	return p, nil
}

// Run passes every Interval until ctx ends; a failed pass is logged (once
// per streak) and the next one tries again.
func (p *Poller) Run(ctx context.Context) {
	p.log.Info("polling EC2's scheduled events (DescribeInstanceStatus)", "interval", p.o.Interval)
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	failing := false
	for {
		err := p.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			p.log.Warn("scheduled-event poll failed; trying again next pass", "err", err)
			failing = true
		case err == nil && failing:
			p.log.Info("scheduled-event poll recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass lists the scheduled events once and acts on the open ones of the
// cluster's live instances.
func (p *Poller) Pass(ctx context.Context) error {
	if p.o.Fence != nil {
		if err := p.o.Fence(ctx); err != nil {
			return fmt.Errorf("not acting on scheduled events: %w", err)
		}
	}
	found, err := p.list.ScheduledEvents(ctx)
	if err != nil {
		return err
	}
	var open []ec2events.Event
	for _, se := range found {
		ev, err := ec2events.FromStatus(se)
		if err != nil {
			p.log.Warn("a scheduled event burst cannot read; ignored", "instance_id", se.InstanceID, "code", se.Code, "err", err)
			p.count.WithLabelValues(OutcomeDropped).Inc()
			continue
		}
		if o, done := p.sched.over(ev); done {
			p.count.WithLabelValues(o).Inc()
			continue
		}
		ev.Time = p.o.Now()
		open = append(open, ev)
	}
	if len(open) == 0 {
		return nil
	}
	insts, err := p.sched.inst.List(ctx)
	if err != nil {
		return fmt.Errorf("listing the cluster's instances: %w", err)
	}
	var errs []error
	for _, ev := range open {
		o, err := p.sched.act(ctx, ev, insts)
		p.count.WithLabelValues(o).Inc()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

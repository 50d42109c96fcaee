package probe

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RegisterShared registers c with reg, or returns the collector of the
// same type that is already registered there with the same metrics, so
// that what is built from a reloaded config keeps counting where the old
// one was. Any other registration error is returned with c.
func RegisterShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	return c, err
}

// MetricValue returns the value of a counter or gauge (0 for others).
func MetricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return 0
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return 0
}

// EachSample calls fn with the labels and the value of every counter or
// gauge that c collects.
func EachSample(c prometheus.Collector, fn func(labels map[string]string, v float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch {
		case d.Counter != nil:
			fn(labels, d.Counter.GetValue())
		case d.Gauge != nil:
			fn(labels, d.Gauge.GetValue())
		}
	}
}

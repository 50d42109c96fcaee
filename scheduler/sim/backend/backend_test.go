package backend

import (
	"testing"
	"time"
)

// TestServeSequence replays a sequence computed by hand: a cache of 10
// KiB keeping objects up to 6 KiB; CPU 100 µs a request and 10 µs a KiB,
// disk 1 ms a miss and 100 µs a KiB; the CPU and the disk each serve one
// request at a time in arrival order.
func TestServeSequence(t *testing.T) {
	b, err := New(Config{Memory: 10 << 10, MaxObject: 6 << 10,
		Costs: Costs{PerRequest: 100 * time.Microsecond, PerKiB: 10 * time.Microsecond, Seek: time.Millisecond, DiskPerKiB: 100 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	us := func(x float64) int64 { return int64(x * 1e3) }
	steps := []struct {
		at   float64 // µs
		key  string
		kib  int64
		done float64 // µs
		hit  bool
		why  string
	}{
		{0, "A", 4, 1540, false, "disk 0–1400, CPU 1400–1540; cache {A}"},
		{0, "B", 4, 2940, false, "disk waits for A: 1400–2800, CPU 2800–2940; cache {A B}"},
		{3000, "A", 4, 3140, true, "CPU 3000–3140; A the most recent"},
		{3000, "C", 4, 4540, false, "disk 3000–4400, CPU 4400–4540; 12 KiB: B, the least recent, goes"},
		{5000, "B", 4, 6540, false, "B was evicted: disk 5000–6400, CPU 6400–6540; A goes"},
		{7000, "D", 8, 8980, false, "larger than 6 KiB, never cached: disk 7000–8800, CPU 8800–8980"},
		{9000, "C", 4, 9140, true, "CPU 9000–9140"},
		{9000, "A", 4, 10540, false, "disk 9000–10400, CPU 10400–10540; B goes"},
		{11000, "B", 4, 12540, false, "disk 11000–12400, CPU 12400–12540; C, the least recent, goes"},
		{11000, "A", 4, 12680, true, "a hit that waits for B on the CPU: 12540–12680"},
	}
	for i, s := range steps {
		done, hit := b.Serve(us(s.at), s.key, s.kib<<10)
		if done != us(s.done) || hit != s.hit {
			t.Errorf("step %d (%s at %g µs): done %g µs hit %v, want %g µs hit %v (%s)", i+1, s.key, s.at, float64(done)/1e3, hit, s.done, s.hit, s.why)
		}
	}
	st := b.Stats()
	// CPU: 10 × 100 µs + 44 KiB × 10 µs; disk: 7 misses × 1 ms + 32 KiB × 100 µs.
	if st.Requests != 10 || st.Hits != 3 || st.Bytes != 44<<10 || st.HitBytes != 12<<10 || st.CachedBytes != 8<<10 ||
		st.CPUBusy != us(1440) || st.DiskBusy != us(10200) {
		t.Errorf("stats %+v, want 10 requests, 3 hits, 44 KiB, 12 KiB hit, 8 KiB cached, CPU 1440 µs, disk 10200 µs busy", st)
	}
}

// TestConfig: the defaults and the refusals.
func TestConfig(t *testing.T) {
	b, err := New(Config{Memory: 1 << 20})
	if err != nil || b.costs != LARDCosts || b.maxObject != 1<<20 {
		t.Errorf("defaults: %+v %v, want LARD's costs and a largest object of the whole memory", b, err)
	}
	for _, c := range []Config{{Memory: -1}, {MaxObject: -1}, {Costs: Costs{Seek: -1}}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

package site

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// zipfFiles is a synthetic frequency table: n files, Zipf(alpha) counts
// out of total requests, log-normal sizes; and its total size.
func zipfFiles(n int, alpha float64, total float64, seed uint64) ([]FileStat, int64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	z := newZipf(n, alpha)
	files := make([]FileStat, n)
	var ws int64
	for r := range files {
		files[r] = FileStat{Key: fmt.Sprint("/f", r), Count: total * z.prob(r), Size: logNormalSize(rng)}
		ws += files[r].Size
	}
	return files, ws
}

func uniformMemory(n int, m int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func TestWardCoreSize(t *testing.T) {
	files, ws := zipfFiles(20_000, 0.8, 1e6, 1)
	const nodes = 4

	t.Run("grows with the forwarding cost", func(t *testing.T) {
		mem := uniformMemory(nodes, ws/8) // the cluster holds half the files
		prev := -1
		var cores []int
		for _, f := range []float64{0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5} {
			k := WardCoreSize(WardInput{Files: files, Memory: mem, ForwardCost: f})
			cores = append(cores, k)
			if k < prev {
				t.Errorf("forward cost %v: core %d < %d at a lower cost", f, k, prev)
			}
			prev = k
		}
		if cores[0] >= cores[len(cores)-1] || cores[len(cores)-1] == 0 {
			t.Errorf("cores %v: want growth from cheap to dear forwarding", cores)
		}
		t.Logf("core sizes by forward cost: %v", cores)
	})

	t.Run("shrinks with memory", func(t *testing.T) {
		prev := len(files) + 1
		var cores []int
		for _, div := range []int64{2, 4, 8, 16, 32, 64, 256} {
			k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(nodes, ws/div), ForwardCost: 0.1})
			cores = append(cores, k)
			if k > prev {
				t.Errorf("memory ws/%d: core %d > %d with more memory", div, k, prev)
			}
			prev = k
		}
		if cores[0] <= cores[len(cores)-1] {
			t.Errorf("cores %v: want shrinking as memory shrinks", cores)
		}
		t.Logf("core sizes by memory ws/2 … ws/256: %v", cores)
	})

	t.Run("sensible core", func(t *testing.T) {
		mem := uniformMemory(nodes, ws/8)
		k := WardCoreSize(WardInput{Files: files, Memory: mem, ForwardCost: 0.1})
		var core int64
		for _, f := range files[:k] {
			core += f.Size
		}
		if k == 0 || core > ws/8 {
			t.Fatalf("core of %d files, %d bytes, for %d bytes of memory", k, core, ws/8)
		}
		// Everything fits: the core is as large as keeps it all in.
		big := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(nodes, ws), ForwardCost: 0.1})
		var s int64
		for _, f := range files[:big] {
			s += f.Size
		}
		if nodes*ws-(nodes-1)*s < ws || big == 0 {
			t.Errorf("with ample memory core %d (%d bytes) pushes files out", big, s)
		}
	})

	tests := []struct {
		name   string
		files  []FileStat
		memory []int64
		fc     float64
		want   int
	}{
		{name: "no nodes", files: files[:10], want: 0},
		{name: "no files", memory: []int64{100}, fc: 1, want: 0},
		{name: "one node: no forwarding, no core", files: files[:100], memory: []int64{1 << 40}, fc: 5, want: 0},
		{name: "core limited by the smallest node", fc: 10,
			files:  []FileStat{{"a", 100, 10}, {"b", 50, 10}, {"c", 10, 10}},
			memory: []int64{15, 1000}, want: 1},
		{name: "unknown sizes take the mean", fc: 10,
			files:  []FileStat{{"a", 100, 0}, {"b", 50, 10}, {"c", 10, 30}},
			memory: []int64{40, 40}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WardCoreSize(WardInput{Files: tt.files, Memory: tt.memory, ForwardCost: tt.fc}); got != tt.want {
				t.Errorf("core %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWard(t *testing.T) {
	t.Run("re-evaluates only after the interval", func(t *testing.T) {
		pol := mustNew(WARD, Params{WardInterval: time.Minute, ForwardCost: 1}, 2).(*ward)
		bs := backends(4, 100_000)
		rng := rand.New(rand.NewPCG(3, 3))
		z := newZipf(1000, 0.8)
		serve := func(at time.Duration, offset int) {
			for k := range 2000 {
				req := Request{Key: fmt.Sprint("/f", z.sample(rng)+offset), Size: 1000}
				now := t0.Add(at + time.Duration(k)*time.Millisecond)
				i, err := pol.Pick(req, bs, now)
				if err != nil {
					t.Fatal(err)
				}
				pol.Done(req, bs[i].Name, now)
			}
		}
		serve(0, 0)
		serve(57*time.Second, 0) // up to 58.999 s
		if len(pol.core) != 0 {
			t.Fatalf("core of %d before the first interval", len(pol.core))
		}
		serve(60*time.Second, 0)
		first := len(pol.core)
		if _, ok := pol.core["/f0"]; first == 0 || !ok {
			t.Fatalf("after the interval core has %d files, /f0 in it: %v", first, ok)
		}
		// Popularity moves to other files: the core holds until the
		// next interval is over.
		serve(62*time.Second, 5000)
		serve(100*time.Second, 5000)
		if _, ok := pol.core["/f0"]; !ok || len(pol.core) != first {
			t.Fatalf("core changed within the interval")
		}
		serve(120*time.Second, 5000)
		if _, ok := pol.core["/f5000"]; !ok {
			t.Errorf("after the second interval the new hot file is not in the core")
		}
	})

	t.Run("core to the least loaded, others to their owner", func(t *testing.T) {
		pol := mustNew(WARD, Params{}, 2).(*ward)
		pol.core = map[string]struct{}{"/core": {}}
		pol.last = t0
		bs := backends(4, 1<<20)
		bs[0].Active, bs[1].Active, bs[2].Active, bs[3].Active = 5, 3, 0, 9
		if i, _ := pol.Pick(Request{Key: "/core"}, bs, t0); i != 2 {
			t.Errorf("core file went to %d, want least loaded 2", i)
		}
		owner, _ := pol.Pick(Request{Key: "/part"}, bs, t0)
		for a := range 4 {
			bs[2].Active = a * 10
			if i, _ := pol.Pick(Request{Key: "/part"}, bs, t0); i != owner {
				t.Fatalf("partitioned file moved from %d to %d", owner, i)
			}
		}
		bs[owner].Active = 200 // ≥ 2·T_high: overloaded
		if i, _ := pol.Pick(Request{Key: "/part"}, bs, t0); i == owner {
			t.Errorf("overloaded owner still chosen")
		}
	})

	t.Run("sketch keeps the frequent keys", func(t *testing.T) {
		var s sketch
		s.init(50)
		rng := rand.New(rand.NewPCG(5, 5))
		z := newZipf(5000, 1.0)
		for range 50_000 {
			s.add(fmt.Sprint("/f", z.sample(rng)), 0)
		}
		files := s.files()
		if len(files) != 50 || len(s.index) != 50 {
			t.Fatalf("%d entries, %d indexed; want 50", len(files), len(s.index))
		}
		for r := range 5 {
			if _, ok := s.index[fmt.Sprint("/f", r)]; !ok {
				t.Errorf("rank %d lost", r)
			}
		}
		if files[0].Key != "/f0" {
			t.Errorf("top key %s, want /f0", files[0].Key)
		}
		s.decay(0.5)
		if got := s.files()[0].Count; got != files[0].Count/2 {
			t.Errorf("decayed count %v, want %v", got, files[0].Count/2)
		}
	})
}

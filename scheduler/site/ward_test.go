package site

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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

// coreOf sums the requests and bytes of the first k files.
func coreOf(files []FileStat, k int) (requests float64, bytes int64) {
	for _, f := range files[:k] {
		requests += f.Count
		bytes += f.Size
	}
	return requests, bytes
}

// balanceCore is the core that balance alone asks for, found the long way:
// files join in order while the next one would make its owner carry more
// than s times the fair share, C_k > ((s−1)·R + P_k)/(N−1).
func balanceCore(files []FileStat, total float64, n int, s float64) int {
	p := 0.0
	for k, f := range files {
		if f.Count <= ((s-1)*total+p)/float64(n-1) {
			return k
		}
		p += f.Count
	}
	return len(files)
}

func TestWardCoreSize(t *testing.T) {
	const balance = 1.25 // Params.WardBalance's default

	t.Run("dispatching front end with memory for everything: only the files balance needs", func(t *testing.T) {
		tests := []struct {
			name  string
			nodes int
			alpha float64
			want  int
		}{
			{"4 back ends, Zipf 0.8: no file is too hot", 4, 0.8, 0},
			{"4 back ends, Zipf 1.0: the top file", 4, 1.0, 1},
			{"16 back ends, Zipf 0.8", 16, 0.8, 1},
			{"16 back ends, Zipf 1.0", 16, 1.0, 3},
			{"64 back ends, Zipf 1.0", 64, 1.0, 11},
			{"2 back ends, Zipf 1.2: the top file is within the slack", 2, 1.2, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				files, ws := zipfFiles(20_000, tt.alpha, 1e6, 1)
				want := balanceCore(files, 1e6, tt.nodes, balance)
				if want != tt.want {
					t.Fatalf("the table says %d, the balance rule %d", tt.want, want)
				}
				for _, m := range []struct {
					name string
					each int64
				}{
					{"each holds it all", ws},
					{"together 1.5 times it", ws * 3 / 2 / int64(tt.nodes)},
				} {
					k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(tt.nodes, m.each), Balance: balance})
					if k != want {
						t.Errorf("%s: core of %d files, want %d", m.name, k, want)
					}
					if bound := float64(tt.nodes-1) / (balance - 1); float64(k) > bound {
						t.Errorf("%s: core of %d files, above the bound (N−1)/(s−1) = %v", m.name, k, bound)
					}
				}
			})
		}
	})

	t.Run("dispatching front end: more back ends, a larger core", func(t *testing.T) {
		files, ws := zipfFiles(20_000, 1.0, 1e6, 1)
		var cores []int
		for _, n := range []int{2, 4, 8, 16, 32, 64} {
			k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(n, ws), Balance: balance})
			if len(cores) > 0 && k < cores[len(cores)-1] {
				t.Errorf("%d back ends: core %d < %d with fewer", n, k, cores[len(cores)-1])
			}
			cores = append(cores, k)
		}
		if cores[0] != 0 || cores[len(cores)-1] < 10 {
			t.Errorf("cores %v by 2 … 64 back ends: want none at 2, at least 10 at 64", cores)
		}
		t.Logf("core sizes by 2 … 64 back ends: %v", cores)
	})

	t.Run("dispatching front end: more skew, more of the requests in the core", func(t *testing.T) {
		var shares []float64
		for _, alpha := range []float64{0.6, 0.8, 1.0, 1.2, 1.4, 1.6} {
			files, ws := zipfFiles(20_000, alpha, 1e6, 1)
			k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(16, ws), Balance: balance})
			p, _ := coreOf(files, k)
			if len(shares) > 0 && p/1e6 < shares[len(shares)-1] {
				t.Errorf("Zipf %v: core share %.3f < %.3f with less skew", alpha, p/1e6, shares[len(shares)-1])
			}
			shares = append(shares, p/1e6)
		}
		if shares[0] != 0 || shares[len(shares)-1] < 0.5 {
			t.Errorf("core shares %.3f by Zipf 0.6 … 1.6: want none at 0.6, over half at 1.6", shares)
		}
		t.Logf("core request shares by Zipf 0.6 … 1.6 over 16 back ends: %.3f", shares)
	})

	t.Run("dispatching front end: memory too small for the core keeps it small", func(t *testing.T) {
		files, ws := zipfFiles(20_000, 1.0, 1e6, 1)
		prev := len(files) + 1
		var cores []int
		for _, div := range []int64{1, 64, 1024, 4096, 8192, 16384} {
			m := ws / div
			k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(16, m), Balance: balance})
			if _, b := coreOf(files, k); b > m {
				t.Errorf("memory ws/%d: core of %d bytes does not fit a back end's %d", div, b, m)
			}
			if k > prev {
				t.Errorf("memory ws/%d: core %d > %d with more memory", div, k, prev)
			}
			prev = k
			cores = append(cores, k)
		}
		if cores[0] != 3 || cores[len(cores)-1] != 0 {
			t.Errorf("cores %v by memory ws … ws/16384: want 3 down to 0", cores)
		}
		t.Logf("core sizes by memory ws … ws/16384: %v", cores)
	})

	files, ws := zipfFiles(20_000, 0.8, 1e6, 1)
	const nodes = 4

	t.Run("forwarding: grows with the forwarding cost", func(t *testing.T) {
		mem := uniformMemory(nodes, ws/8) // the cluster holds half the files
		prev := -1
		var cores []int
		for _, f := range []float64{0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5} {
			k := WardCoreSize(WardInput{Files: files, Memory: mem, ForwardCost: f, Balance: balance})
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

	t.Run("forwarding: shrinks with memory", func(t *testing.T) {
		prev := len(files) + 1
		var cores []int
		for _, div := range []int64{2, 4, 8, 16, 32, 64, 256} {
			k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(nodes, ws/div), ForwardCost: 0.1, Balance: balance})
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

	t.Run("forwarding: a core within the smallest back end", func(t *testing.T) {
		k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(nodes, ws/8), ForwardCost: 0.1, Balance: balance})
		if _, b := coreOf(files, k); k == 0 || b > ws/8 {
			t.Fatalf("core of %d files, %d bytes, for %d bytes of memory", k, b, ws/8)
		}
	})

	t.Run("forwarding with memory for everything: the files whose saving pays for their copies", func(t *testing.T) {
		// A core file saves F·(N−1)/N per request and costs N−1 misses to
		// fill the copies: it pays above N/F requests.
		const f = 0.1
		k := WardCoreSize(WardInput{Files: files, Memory: uniformMemory(nodes, ws), ForwardCost: f, Balance: balance})
		if k == 0 || k == len(files) {
			t.Fatalf("core of %d of %d files", k, len(files))
		}
		if last, next := files[k-1].Count, files[k].Count; !(last > nodes/f && next <= nodes/f) {
			t.Errorf("core ends at %v requests, the next file has %v: want the cut at N/F = %v", last, next, nodes/f)
		}
	})

	tests := []struct {
		name    string
		files   []FileStat
		tail    float64
		memory  []int64
		fc      float64
		balance float64
		want    int
	}{
		{name: "no nodes", files: files[:10], balance: balance, want: 0},
		{name: "no files", memory: []int64{100}, fc: 1, balance: balance, want: 0},
		{name: "one node: no forwarding, no core", files: files[:100], memory: []int64{1 << 40}, fc: 5, balance: balance, want: 0},
		{name: "forwarding: core limited by the smallest node", fc: 10,
			files:  []FileStat{{"a", 100, 10}, {"b", 50, 10}, {"c", 10, 10}},
			memory: []int64{15, 1000}, want: 1},
		{name: "forwarding: unknown sizes take the mean", fc: 10,
			files:  []FileStat{{"a", 100, 0}, {"b", 50, 10}, {"c", 10, 30}},
			memory: []int64{40, 40}, want: 2},
		// R = 1000, τ_0 = 0.25·1000/3 ≈ 83 puts a, b and c above the
		// balance; with a in the core τ_1 = (250+500)/3 = 250 leaves b and
		// c below it.
		{name: "dispatch: the file too hot for one owner", balance: balance, tail: 200,
			files:  []FileStat{{"a", 500, 10}, {"b", 200, 10}, {"c", 100, 10}},
			memory: uniformMemory(4, 1000), want: 1},
		{name: "dispatch without the balance term: no core", tail: 200,
			files:  []FileStat{{"a", 500, 10}, {"b", 200, 10}, {"c", 100, 10}},
			memory: uniformMemory(4, 1000), want: 0},
		// The copy of a would push c (20 requests) out of the partition to
		// spare a's owner 0.5·(60−25) = 17.5 requests.
		{name: "dispatch: a copy that pushes out more hits than it balances", balance: balance,
			files:  []FileStat{{"a", 60, 100}, {"b", 20, 100}, {"c", 20, 100}},
			memory: []int64{150, 150}, want: 0},
		{name: "dispatch: the same with room for the copy", balance: balance,
			files:  []FileStat{{"a", 60, 100}, {"b", 20, 100}, {"c", 20, 100}},
			memory: []int64{200, 200}, want: 1},
		{name: "dispatch: a hot file larger than the smallest node", balance: balance,
			files:  []FileStat{{"a", 60, 300}, {"b", 20, 100}, {"c", 20, 100}},
			memory: []int64{250, 1000}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := WardInput{Files: tt.files, TailCount: tt.tail, Memory: tt.memory, ForwardCost: tt.fc, Balance: tt.balance}
			if got := WardCoreSize(in); got != tt.want {
				t.Errorf("core %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWard(t *testing.T) {
	t.Run("defaults: a dispatching front end", func(t *testing.T) {
		pol := mustNew(WARD, Params{}, 2).(*ward)
		if pol.p.ForwardCost != 0 || pol.p.WardBalance != 1.25 {
			t.Errorf("forward cost %v, balance %v: want 0 and 1.25", pol.p.ForwardCost, pol.p.WardBalance)
		}
	})

	t.Run("parameters", func(t *testing.T) {
		tests := []struct {
			name string
			p    Params
			want string // substring of the error, "" for none
		}{
			{"the old default forward cost still loads", Params{ForwardCost: 0.1}, ""},
			{"negative forward cost", Params{ForwardCost: -1}, "forward_cost -1 must not be negative"},
			{"balance of 1 leaves no slack", Params{WardBalance: 1}, "ward_balance 1 must be above 1"},
			{"balance below 1", Params{WardBalance: 0.5}, "ward_balance 0.5 must be above 1"},
			{"infinite balance", Params{WardBalance: math.Inf(1)}, "ward_balance +Inf must be above 1"},
			{"a larger balance", Params{WardBalance: 2}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := New(WARD, tt.p, rand.New(rand.NewPCG(1, 1)))
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("error %v, want none", err)
				case tt.want != "" && (!errors.Is(err, ErrBadParams) || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("error %v, want ErrBadParams with %q", err, tt.want)
				}
			})
		}
	})

	t.Run("re-evaluates only after the interval", func(t *testing.T) {
		pol := mustNew(WARD, Params{WardInterval: time.Minute}, 2).(*ward)
		bs := backends(4, 100_000)
		rng := rand.New(rand.NewPCG(3, 3))
		// Zipf 1.2 over 1,000 files: the top file has 23% of the requests,
		// too many for one of 4 back ends (τ_0 = 0.25/3 ≈ 8%); the second,
		// 10%, is below τ_1 = (0.25+0.23)/3 = 16%.
		z := newZipf(1000, 1.2)
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
		if _, ok := pol.core["/f0"]; len(pol.core) != 1 || !ok {
			t.Fatalf("after the interval core has %d files, /f0 in it: %v; want /f0 alone", len(pol.core), ok)
		}
		// Popularity moves to other files: the core holds until the
		// next interval is over.
		serve(62*time.Second, 5000)
		serve(80*time.Second, 5000)
		serve(100*time.Second, 5000)
		if _, ok := pol.core["/f0"]; !ok || len(pol.core) != 1 {
			t.Fatalf("core changed within the interval")
		}
		// Halved at the first analysis, /f0 has about 920 requests, the
		// new top file about 1,380 of 10,000; with it in the core τ_1 is
		// about 1,290.
		serve(120*time.Second, 5000)
		if _, ok := pol.core["/f5000"]; !ok || len(pol.core) != 1 {
			t.Errorf("after the second interval core %v, want the new hot file /f5000 alone", pol.core)
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

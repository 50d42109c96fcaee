package site

import (
	"cmp"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// FileStat is one file as the ward-analysis sees it: how often it was
// requested and how large it is.
type FileStat struct {
	Key   string
	Count float64
	Size  int64
}

// WardInput is what the ward-analysis works from.
type WardInput struct {
	// Files are the counted files, sorted by Count, descending.
	Files []FileStat
	// TailCount is the number of requests to files not in Files, and
	// TailBytes an estimate of those files' total size (0: unknown, the
	// tail is then taken to miss always).
	TailCount float64
	TailBytes int64
	// Memory is the memory of each of the N back ends.
	Memory []int64
	// ForwardCost is F, the cost of forwarding a request to a partitioned
	// file's owner relative to the cost of a cache miss, in the paper's
	// architecture where every back end is also a front end. 0 for a front
	// end that dispatches every request (transmirror's).
	ForwardCost float64
	// Balance is s: a back end may carry up to s times its fair share of
	// the requests (1/N) before the requests above that count as misses.
	// It must be above 1; 1 or less leaves the balance term out.
	Balance float64
}

// WardCoreSize is the ward-analysis: it returns k, the number of leading
// files of in.Files that form the core, the files that every back end
// keeps and any back end serves. It weighs what replicating a file buys
// against what it costs, in units of one cache miss, over the requests
// counted in in.Files. The memory and forwarding terms are Cherkasova &
// Karlsson's; the balance and filling terms are ours.
//
//   - Memory. The core, files 1..k of S_k bytes in all, is in every back
//     end's memory, so it must fit the smallest one: S_k ≤ min M_i. The
//     remaining memory of all back ends, ΣM_i − N·S_k, holds one copy of
//     the most frequent partitioned files k+1..j(k), the largest j with
//     S_j − S_k ≤ ΣM_i − N·S_k; what is left after all of Files holds a
//     proportional part of the tail, whose files are all equally cold:
//     tail hits = TailCount · min(1, left/TailBytes). Every other request
//     misses. Each core file thus takes N−1 times its size from the
//     partition.
//   - Forwarding. In the paper every node is a front end: a request
//     arrives at a random node, which serves a core file itself and
//     forwards a partitioned one to its owner, at cost F, unless it is
//     the owner (once in N). That is all the core buys in the paper.
//     transmirror's front end (proxy, redirect or handoff) dispatches
//     every request, core or not, so there forwarding costs the same for
//     every k and drops out: F = 0. F > 0 keeps the paper's model.
//   - Balance. All the requests of a partitioned file go to its owner.
//     Core requests go to the least loaded back end, so they fill the
//     others up to the owners' load. The owner of file i carries C_i and
//     its mean part of the other partitioned requests,
//     C_i + (R − P_k − C_i)/N (the model takes the back ends as equal and
//     does not look at which hot files share an owner); above s·R/N it is
//     overloaded by (N−1)/N·(C_i − τ_k), τ_k = ((s−1)·R + P_k)/(N−1), and
//     those requests count as misses: the overload rule sends them to a
//     back end that does not keep the file, or they wait. With F = 0
//     balance is all the core buys.
//   - Filling. Each core file is fetched once by each of the N−1 back
//     ends that would not keep it otherwise: N−1 misses per core file.
//
// With R = ΣCount + TailCount, P_k the requests to files 1..k and C_i
// those to file i,
//
//	cost(k) = F·(N−1)/N·(R − P_k)                               forwarding
//	        + (R − TailCount − P_j(k)) + TailCount − tail hits(k)  misses
//	        + (N−1)·k                                            filling
//	        + (N−1)/N·Σ_{i>k} max(0, C_i − τ_k)                  overload
//
// and the core is the k of least cost; ties go to the smaller core. With
// F = 0 and memory to spare, the core is the few files that balance needs,
// each above (s−1)·R/(N−1) requests, so at most (N−1)/(s−1) of them; with
// F > 0 it also takes the files whose forwarding saving pays for their
// copies, C_i > N/F, as far as memory allows. A larger F never gives a
// smaller core. Sizes of 0 count as the mean of the known sizes. One back
// end, or none, has no core. The work is O(len(Files)) besides the prefix
// sums it allocates.
func WardCoreSize(in WardInput) int {
	files, memory := in.Files, in.Memory
	n := len(memory)
	if n <= 1 || len(files) == 0 {
		return 0
	}
	var sumM int64
	minM := memory[0]
	for _, m := range memory {
		m = max(m, 0)
		sumM += m
		minM = min(minM, m)
	}
	var known, knownBytes int64
	counted := 0.0
	for _, f := range files {
		counted += f.Count
		if f.Size > 0 {
			known++
			knownBytes += f.Size
		}
	}
	total := counted + max(in.TailCount, 0)
	meanSize := int64(1)
	if known > 0 {
		meanSize = max(1, knownBytes/known)
	}
	size := func(i int) int64 {
		if s := files[i].Size; s > 0 {
			return s
		}
		return meanSize
	}
	// Prefix sums: S[i] bytes and P[i] requests of files 0..i-1.
	S := make([]int64, len(files)+1)
	P := make([]float64, len(files)+1)
	for i := range files {
		S[i+1] = S[i] + size(i)
		P[i+1] = P[i] + files[i].Count
	}
	nf := float64(n)
	fwd := in.ForwardCost * (nf - 1) / nf
	// j(k) never grows with k: the partition's room ΣM − (N−1)·S_k
	// shrinks. e, the number of leading files above τ_k, never grows
	// either: τ_k grows with P_k.
	j, e := len(files), len(files)
	bestK, bestCost := 0, 0.0
	for k := 0; k <= len(files) && S[k] <= minM; k++ {
		room := sumM - int64(n-1)*S[k] // holds S_j, core included
		for j > k && S[j] > room {
			j--
		}
		tailMiss := max(in.TailCount, 0)
		if j == len(files) && in.TailBytes > 0 {
			tailMiss *= 1 - min(1, float64(room-S[j])/float64(in.TailBytes))
		}
		c := fwd*(total-P[k]) + (counted - P[j]) + tailMiss + (nf-1)*float64(k)
		if in.Balance > 1 {
			tau := ((in.Balance-1)*total + P[k]) / (nf - 1)
			for e > k && files[e-1].Count <= tau {
				e--
			}
			if e > k {
				c += (nf - 1) / nf * (P[e] - P[k] - float64(e-k)*tau)
			}
		}
		if k == 0 || c < bestCost {
			bestK, bestCost = k, c
		}
	}
	return bestK
}

// ward is the workload-aware request distribution policy; see [WARD].
type ward struct {
	p        Params
	mu       sync.Mutex
	rng      *rand.Rand
	sketch   sketch
	distinct distinctCounter // keys seen in this interval and the last
	core     map[string]struct{}
	last     time.Time // time of the last analysis, zero before the first pick
	analysed time.Time // time of the last analysis, zero before the first one (State)
	// coreBytes is the known size of the core files (State).
	coreBytes int64
}

var _ Policy = (*ward)(nil)

func newWard(p Params, rng *rand.Rand) *ward {
	w := &ward{p: p, rng: rng, core: map[string]struct{}{}}
	w.sketch.init(p.SketchEntries)
	return w
}

func (w *ward) Name() string { return WARD }

func (w *ward) Pick(req Request, bs []Backend, now time.Time) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	least, minLoad := leastLoaded(bs, req.Has, w.rng)
	if least < 0 {
		return -1, ErrNoBackend
	}
	switch {
	case w.last.IsZero():
		w.last = now
	case now.Sub(w.last) >= w.p.WardInterval:
		w.analyse(bs)
		w.last, w.analysed = now, now
	}
	w.sketch.add(req.Key, req.Size)
	h := hashString(fnvOffset, req.Key)
	w.distinct.add(mix64(h))
	if _, ok := w.core[req.Key]; ok {
		return least, nil
	}
	owner := rendezvous(h, bs, req.Has)
	if overloaded(load(&bs[owner]), minLoad, &w.p) {
		return least, nil
	}
	return owner, nil
}

// Done learns the size of req.Key.
func (w *ward) Done(req Request, _ string, _ time.Time) {
	if req.Size <= 0 {
		return
	}
	w.mu.Lock()
	w.sketch.setSize(req.Key, req.Size)
	w.mu.Unlock()
}

// analyse chooses the core from the sketch and the up back ends' memory,
// then halves the counts so that the next analysis weighs recent requests
// more. Files are counted at their guaranteed count (count − error); the
// rest of the requests are the tail, whose bytes are the distinct keys
// seen in this interval and the one before, less the files, at the files' mean size.
func (w *ward) analyse(bs []Backend) {
	in := WardInput{ForwardCost: w.p.ForwardCost, Balance: w.p.WardBalance}
	for i := range bs {
		if bs[i].Up {
			in.Memory = append(in.Memory, bs[i].MemoryBytes)
		}
	}
	in.Files = w.sketch.files()
	counted, known, knownBytes := 0.0, int64(0), int64(0)
	for _, f := range in.Files {
		counted += f.Count
		if f.Size > 0 {
			known++
			knownBytes += f.Size
		}
	}
	in.TailCount = max(0, w.sketch.total-counted)
	if tail := w.distinct.estimate() - float64(len(in.Files)); tail > 0 && known > 0 {
		in.TailBytes = int64(tail * float64(knownBytes) / float64(known))
	}
	k := WardCoreSize(in)
	core := make(map[string]struct{}, k)
	var coreBytes int64
	for _, f := range in.Files[:k] {
		core[f.Key] = struct{}{}
		coreBytes += f.Size
	}
	w.core, w.coreBytes = core, coreBytes
	w.sketch.decay(0.5)
	w.distinct.next()
}

// distinctCounter estimates the number of distinct keys requested in the
// current and the previous interval by linear counting (Whang, Vander-Zanden
// & Taylor, 1990) over two bitmaps of 2^16 bits (16 KiB in all), good to a
// few hundred thousand keys.
type distinctCounter struct {
	cur, prev [1 << 10]uint64
}

func (d *distinctCounter) add(h uint64) {
	h &= 1<<16 - 1
	d.cur[h>>6] |= 1 << (h & 63)
}

func (d *distinctCounter) estimate() float64 {
	const m = 1 << 16
	zeros := 0
	for i, w := range d.cur {
		zeros += 64 - bits.OnesCount64(w|d.prev[i])
	}
	return m * math.Log(m/float64(max(zeros, 1)))
}

// next starts a new interval.
func (d *distinctCounter) next() {
	d.prev = d.cur
	d.cur = [1 << 10]uint64{}
}

// sketch is a space-saving top-K counter (Metwally, Agrawal & El Abbadi,
// 2005): at most cap entries; a new key replaces the entry of the smallest
// count and inherits that count plus one, so every frequent key is kept
// and counts are overestimated by at most total/cap. Entries live in fixed
// slots; heap orders the slots by count, smallest first.
type sketch struct {
	cap     int
	index   map[string]int32
	entries []sketchEntry
	heap    []int32
	total   float64 // all requests counted, decayed like the counts
}

type sketchEntry struct {
	key   string
	count float64
	err   float64 // the count inherited on replacement: an upper bound on the overestimate
	size  int64
	pos   int32 // position in heap
}

func (s *sketch) init(capacity int) {
	s.cap = capacity
	s.index = make(map[string]int32)
}

func (s *sketch) add(key string, size int64) {
	s.total++
	if i, ok := s.index[key]; ok {
		e := &s.entries[i]
		e.count++
		if size > 0 {
			e.size = size
		}
		s.down(int(e.pos))
		return
	}
	if len(s.entries) < s.cap {
		i := int32(len(s.entries))
		s.entries = append(s.entries, sketchEntry{key: key, count: 1, size: size, pos: int32(len(s.heap))})
		s.heap = append(s.heap, i)
		s.index[key] = i
		s.up(len(s.heap) - 1)
		return
	}
	i := s.heap[0]
	e := &s.entries[i]
	delete(s.index, e.key)
	e.key, e.err, e.count, e.size = key, e.count, e.count+1, size
	s.index[key] = i
	s.down(0)
}

func (s *sketch) setSize(key string, size int64) {
	if i, ok := s.index[key]; ok {
		s.entries[i].size = size
	}
}

// decay multiplies every count by f, which keeps the heap order.
func (s *sketch) decay(f float64) {
	for i := range s.entries {
		s.entries[i].count *= f
		s.entries[i].err *= f
	}
	s.total *= f
}

// files returns the files with a guaranteed count (count − error) above
// zero, by that count, descending (ties by key).
func (s *sketch) files() []FileStat {
	out := make([]FileStat, 0, len(s.entries))
	for _, e := range s.entries {
		if g := e.count - e.err; g > 0 {
			out = append(out, FileStat{Key: e.key, Count: g, Size: e.size})
		}
	}
	slices.SortFunc(out, func(a, b FileStat) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

func (s *sketch) less(a, b int) bool {
	return s.entries[s.heap[a]].count < s.entries[s.heap[b]].count
}

func (s *sketch) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.entries[s.heap[a]].pos = int32(a)
	s.entries[s.heap[b]].pos = int32(b)
}

func (s *sketch) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !s.less(j, i) {
			return
		}
		s.swap(i, j)
		j = i
	}
}

func (s *sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && s.less(r, l) {
			j = r
		}
		if !s.less(j, i) {
			return
		}
		s.swap(i, j)
		i = j
	}
}

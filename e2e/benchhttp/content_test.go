package benchhttp

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The generated content: one 4 KiB file, a mix of mixFiles files of
// 4 KiB each, one 1 MiB file, and the path the mirror's health checks
// ask for.
const (
	smallSize  = 4 << 10
	largeSize  = 1 << 20
	mixFiles   = 1000
	smallPath  = "/4k.bin"
	largePath  = "/1m.bin"
	healthPath = "/-/healthy"
)

// mixPath is the URL path of file i of the mix.
func mixPath(i int) string { return fmt.Sprintf("/mix/%04d.bin", i) }

// kind is one kind of response the benchmark measures: the paths wrk
// asks for, in turn.
type kind struct {
	name  string
	paths []string
}

// kinds are the three response kinds, in the order of the table.
func kinds() []kind {
	mix := make([]string, mixFiles)
	for i := range mix {
		mix[i] = mixPath(i)
	}
	return []kind{
		{name: "one 4 KiB file", paths: []string{smallPath}},
		{name: "1,000 × 4 KiB URL mix", paths: mix},
		{name: "one 1 MiB file", paths: []string{largePath}},
	}
}

// writeContent writes the files below root, each of random bytes from a
// fixed seed (every file different, so that a response from the wrong
// file shows).
func writeContent(root string) error {
	rng := rand.New(rand.NewPCG(25, 1))
	files := map[string]int{smallPath: smallSize, largePath: largeSize}
	for i := range mixFiles {
		files[mixPath(i)] = smallSize
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		body := make([]byte, files[p])
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		if err := writeFile(filepath.Join(root, filepath.FromSlash(p)), body); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(root, filepath.FromSlash(healthPath)), []byte("ok\n"))
}

// writeFile writes body to path, making its directory.
func writeFile(path string, body []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// status is the status of a GET of url (no proxy, 5 s at most).
func status(url string) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// fetched is curl's account of one transfer: status, bytes, the X-Backend
// header of the nginx back end that served it ("" for a mirror back end)
// and the body.
type fetched struct {
	code    int
	size    int64
	backend string
	body    []byte
}

// curlAll fetches base+path for every path in one curl run (one
// connection, kept alive unless closeConn asks for a new one each time)
// and returns the transfers in order.
func curlAll(ctx context.Context, dir, base string, paths []string, closeConn bool) ([]fetched, error) {
	var cfg strings.Builder
	for i, p := range paths {
		fmt.Fprintf(&cfg, "url = %q\noutput = %q\n", base+p, filepath.Join(dir, strconv.Itoa(i)))
	}
	cfgPath := filepath.Join(dir, "curl.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		return nil, err
	}
	args := []string{"-sS", "--noproxy", "*", "--max-time", "60", "-K", cfgPath,
		"-w", `%{http_code} %{size_download} %header{x-backend}\n`}
	if closeConn {
		args = append(args, "-H", "Connection: close")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("curl: %w\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(paths) {
		return nil, fmt.Errorf("curl: %d transfers reported, want %d:\n%s", len(lines), len(paths), out)
	}
	got := make([]fetched, len(paths))
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			return nil, fmt.Errorf("curl: transfer %d: %q", i, l)
		}
		got[i].code, _ = strconv.Atoi(f[0])
		got[i].size, _ = strconv.ParseInt(f[1], 10, 64)
		if len(f) > 2 {
			got[i].backend = f[2]
		}
		if got[i].body, err = os.ReadFile(filepath.Join(dir, strconv.Itoa(i))); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// checkBodies compares each transfer of paths with the file below root:
// 200, the file's size, the same bytes. It returns the back end of each
// path (by X-Backend).
func checkBodies(root string, paths []string, got []fetched) (map[string]string, error) {
	by := map[string]string{}
	for i, p := range paths {
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		g := got[i]
		switch {
		case g.code != http.StatusOK:
			return nil, fmt.Errorf("%s: status %d, want 200", p, g.code)
		case g.size != int64(len(want)):
			return nil, fmt.Errorf("%s: %d bytes, want %d", p, g.size, len(want))
		case !bytes.Equal(g.body, want):
			return nil, fmt.Errorf("%s: the body is not the file's", p)
		}
		by[p] = g.backend
	}
	return by, nil
}

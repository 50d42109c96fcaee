package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
)

// TestGroupctlRepeatedDrains: the real groupctl drains, undrains and
// drains a member of the real dnsd in quick succession (usually within
// one second, when signatures without a nonce made the third a replay):
// all three succeed. One signed request sent twice is refused the second
// time as a replay.
func TestGroupctlRepeatedDrains(t *testing.T) {
	const secret = "e2e-group-secret"
	d := startMembersDNSD(t, t.TempDir())
	start := time.Now()
	for i, cmd := range []string{"drain", "undrain", "drain"} {
		if out, err := groupctl(t, d.Admin, secret, cmd, "www.example.test", "sin1"); err != nil {
			t.Fatalf("command %d, groupctl %s: %v\n%s", i+1, cmd, err, out)
		}
	}
	t.Logf("drain, undrain, drain in %v", time.Since(start).Round(time.Millisecond))
	out, err := groupctl(t, d.Admin, secret, "-o", "json", "status", "www.example.test")
	if err != nil || !strings.Contains(out, `"state":"draining"`) {
		t.Errorf("after drain, undrain, drain sin1 must be draining: %v\n%s", err, out)
	}

	// One request, signed once, sent twice (a captured request replayed).
	const path = "/v1/groups/www.example.test./members/sin1/undrain"
	header := api.Sign([]byte(secret), http.MethodPost, path, nil, time.Now())
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s%s", d.Admin, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.SignatureHeader, header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == http.StatusUnauthorized && !strings.Contains(string(body), "replayed") {
			t.Errorf("request %d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
}

package api

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var listAt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func threeMirrors() MirrorList {
	return MirrorList{
		Name: "debian-13.2.0-amd64-netinst.iso", Size: 783286272,
		Modified: time.Date(2026, 11, 15, 10, 30, 0, 0, time.FixedZone("CET", 3600)), Published: listAt,
		Generator: "transmirror",
		URLs: []MirrorURL{
			{URL: "https://fra1.mirrors.example.org/debian-cd/13.2.0/amd64/iso-cd/debian-13.2.0-amd64-netinst.iso", Location: "DE"},
			{URL: "http://ams1.mirrors.example.org/debian-cd/13.2.0/amd64/iso-cd/debian-13.2.0-amd64-netinst.iso", Location: "nl"},
			{URL: "http://[2001:db8::10]:8080/debian-cd/13.2.0/amd64/iso-cd/debian-13.2.0-amd64-netinst.iso?a=1&b=2"},
		},
	}
}

// TestWriteMetalink checks the document against the golden file and
// against RFC 5854's grammar (testdata/metalink4.rng) with the real
// xmllint, and reads it back: the members in order, priorities 1, 2, 3.
func TestWriteMetalink(t *testing.T) {
	tests := []struct {
		name   string
		list   MirrorList
		golden string
	}{
		{"three mirrors", threeMirrors(), "metalink-three.golden"},
		{"size unknown, no time, no location", MirrorList{Name: "f.bin", Size: -1, Published: listAt,
			URLs: []MirrorURL{{URL: "http://a.example.org/f.bin", Location: "Germany"}}}, "metalink-unknown.golden"},
		{"a name that needs escaping", MirrorList{Name: `a<b>&"c".txt`, Size: 0, Published: listAt,
			URLs: []MirrorURL{{URL: "http://a.example.org/a%3Cb%3E%26%22c%22.txt"}}}, "metalink-escaped.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteMetalink(&b, tt.list); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, b.Bytes())
			validateMetalink(t, b.Bytes())
			var doc metalinkDoc
			if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.File.Name != tt.list.Name || len(doc.File.URLs) != len(tt.list.URLs) {
				t.Fatalf("read back %q with %d urls, want %q with %d", doc.File.Name, len(doc.File.URLs), tt.list.Name, len(tt.list.URLs))
			}
			for i, u := range doc.File.URLs {
				if u.URL != tt.list.URLs[i].URL || u.Priority != i+1 {
					t.Errorf("url %d: %q priority %d, want %q priority %d", i, u.URL, u.Priority, tt.list.URLs[i].URL, i+1)
				}
			}
		})
	}
}

// validateMetalink runs xmllint --relaxng on doc (make deps installs it).
func validateMetalink(t *testing.T, doc []byte) {
	t.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatal("xmllint is not installed (make deps installs libxml2-utils): the Metalink output can not be checked against RFC 5854's grammar")
	}
	f := filepath.Join(t.TempDir(), "list.meta4")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(xmllint, "--noout", "--nonet", "--relaxng", filepath.Join("testdata", "metalink4.rng"), f).CombinedOutput()
	if err != nil {
		t.Fatalf("xmllint: %v\n%s\n%s", err, out, doc)
	}
}

// TestMetalinkSchemaRefuses proves the schema check can fail: documents
// RFC 5854 does not allow are refused by xmllint.
func TestMetalinkSchemaRefuses(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMetalink(&b, threeMirrors()); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	tests := []struct{ name, from, to string }{
		{"priority 0", `priority="1"`, `priority="0"`},
		{"a three-letter location", `location="de"`, `location="deu"`},
		{"a negative size", "<size>783286272</size>", "<size>-1</size>"},
		{"no file", good[strings.Index(good, "  <file"):strings.Index(good, "</metalink>")], ""},
		{"another namespace", MetalinkNamespace, "http://www.metalinker.org/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(good, tt.from, tt.to, 1)
			if bad == good {
				t.Fatalf("%q is not in the document", tt.from)
			}
			f := filepath.Join(t.TempDir(), "bad.meta4")
			if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("xmllint", "--noout", "--nonet", "--relaxng", filepath.Join("testdata", "metalink4.rng"), f).CombinedOutput(); err == nil {
				t.Errorf("xmllint accepted:\n%s\n%s", bad, out)
			}
		})
	}
}

func TestWriteMirrorText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMirrorText(&b, threeMirrors()); err != nil {
		t.Fatal(err)
	}
	golden(t, "mirrorlist-three.golden", b.Bytes())
}

func TestMirrorListRefused(t *testing.T) {
	base := threeMirrors()
	tests := []struct {
		name string
		edit func(l *MirrorList)
		want error // nil: any error
	}{
		{"empty name", func(l *MirrorList) { l.Name = "" }, ErrMirrorListName},
		{"a path, not a name", func(l *MirrorList) { l.Name = "pool/f.deb" }, ErrMirrorListName},
		{"dot dot", func(l *MirrorList) { l.Name = ".." }, ErrMirrorListName},
		{"NUL", func(l *MirrorList) { l.Name = "f\x00" }, ErrMirrorListName},
		{"invalid UTF-8", func(l *MirrorList) { l.Name = "f\xff" }, ErrMirrorListName},
		{"no member", func(l *MirrorList) { l.URLs = nil }, nil},
		{"relative URL", func(l *MirrorList) { l.URLs = []MirrorURL{{URL: "/pool/f.deb"}} }, ErrMirrorListURL},
		{"ftp", func(l *MirrorList) { l.URLs = []MirrorURL{{URL: "ftp://a.example.org/f"}} }, ErrMirrorListURL},
		{"a line break", func(l *MirrorList) { l.URLs = []MirrorURL{{URL: "http://a.example.org/f\nhttp://evil.example/"}} }, ErrMirrorListURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := base
			l.URLs = append([]MirrorURL(nil), base.URLs...)
			tt.edit(&l)
			for _, write := range []func() error{
				func() error { return WriteMetalink(&bytes.Buffer{}, l) },
				func() error { return WriteMirrorText(&bytes.Buffer{}, l) },
			} {
				err := write()
				if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
					t.Errorf("got %v, want %v", err, tt.want)
				}
			}
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// FuzzWriteMetalink: whatever the name and URLs, WriteMetalink refuses
// them or writes a document that parses and reads back the same name and
// URLs in order.
func FuzzWriteMetalink(f *testing.F) {
	f.Add("f.iso", "http://a.example.org/f.iso", "de", "https://b.example.org/x?y=1&z=<2>", int64(10))
	f.Add(`a<b>&"c"`, "http://[2001:db8::1]:80/", "", "http://c/\x00", int64(-1))
	f.Fuzz(func(t *testing.T, name, u1, loc, u2 string, size int64) {
		l := MirrorList{Name: name, Size: size, Published: listAt, URLs: []MirrorURL{{URL: u1, Location: loc}, {URL: u2}}}
		var b bytes.Buffer
		if err := WriteMetalink(&b, l); err != nil {
			return
		}
		var doc metalinkDoc
		if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("written but unreadable: %v\n%s", err, b.Bytes())
		}
		if doc.File.Name != name || len(doc.File.URLs) != 2 || doc.File.URLs[0].URL != u1 || doc.File.URLs[1].URL != u2 {
			t.Fatalf("read back %q %+v, want %q [%q %q]", doc.File.Name, doc.File.URLs, name, u1, u2)
		}
	})
}

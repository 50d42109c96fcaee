package api

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MirrorList is the members that hold one file, best first for one
// client, as a mirror list answers it: as Metalink (RFC 5854,
// application/metalink4+xml) for clients that fetch from several
// members at once (aria2, zsync), or as plain text, one URL a line.
type MirrorList struct {
	// Name is the file's name, the last segment of its path.
	Name string
	// Size is the file's size in bytes (the best copy's); negative when
	// unknown, and then left out.
	Size int64
	// Modified is the best copy's modification time; zero leaves
	// metalink:updated out.
	Modified time.Time
	// Published is when the list was made (metalink:published).
	Published time.Time
	// Generator names the software (metalink:generator).
	Generator string
	// URLs are the members' URLs of the file, best first.
	URLs []MirrorURL
}

// MirrorURL is one member's URL of a file.
type MirrorURL struct {
	// URL is an absolute http or https URL.
	URL string
	// Location is the member's ISO 3166-1 alpha-2 country code, "" when
	// unknown.
	Location string
}

// Media types of the mirror list.
const (
	MediaMetalink = "application/metalink4+xml"
	MediaText     = "text/plain; charset=utf-8"
)

// MetalinkNamespace is RFC 5854's XML namespace.
const MetalinkNamespace = "urn:ietf:params:xml:ns:metalink"

// maxMetalinkPriority is the largest priority RFC 5854 allows.
const maxMetalinkPriority = 999999

// Errors of a mirror list that can not be written.
var (
	ErrMirrorListName = errors.New("api: mirror list: the file name must be one path segment of valid UTF-8 without control characters")
	ErrMirrorListURL  = errors.New("api: mirror list: a URL must be an absolute http or https URL of valid UTF-8 without control characters")
)

type metalinkDoc struct {
	XMLName   xml.Name     `xml:"urn:ietf:params:xml:ns:metalink metalink"`
	Generator string       `xml:"generator,omitempty"`
	Published string       `xml:"published"`
	Updated   string       `xml:"updated,omitempty"`
	File      metalinkFile `xml:"file"`
}

type metalinkFile struct {
	Name string        `xml:"name,attr"`
	Size *int64        `xml:"size,omitempty"`
	URLs []metalinkURL `xml:"url"`
}

type metalinkURL struct {
	Location string `xml:"location,attr,omitempty"`
	Priority int    `xml:"priority,attr"`
	URL      string `xml:",chardata"`
}

// check reports whether l can be written: a name that is one segment, at
// least one URL (RFC 5854 4.1.2: a file has a url or a metaurl), each
// absolute http or https.
func (l MirrorList) check() error {
	if l.Name == "" || l.Name == "." || l.Name == ".." || strings.Contains(l.Name, "/") || !xmlText(l.Name) {
		return fmt.Errorf("%w: %q", ErrMirrorListName, l.Name)
	}
	if len(l.URLs) == 0 {
		return fmt.Errorf("api: mirror list: %q: no member holds it", l.Name)
	}
	for _, u := range l.URLs {
		p, err := url.Parse(u.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || !xmlText(u.URL) {
			return fmt.Errorf("%w: %q", ErrMirrorListURL, u.URL)
		}
	}
	return nil
}

// xmlText reports whether s is valid UTF-8 without control characters,
// so that XML carries it as it is (XML 1.0 has no escape for most of
// them, and a URL or a file name has no business holding one).
func xmlText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffe || r == 0xffff {
			return false
		}
	}
	return true
}

// WriteMetalink writes l as a Metalink 4 document (RFC 5854): one file,
// its size, and a url per member with priority 1 for the best and rising
// by one after it (lower is preferred), and the member's country as
// location when it is two letters.
func WriteMetalink(w io.Writer, l MirrorList) error {
	if err := l.check(); err != nil {
		return err
	}
	doc := metalinkDoc{Generator: l.Generator, Published: l.Published.UTC().Format(time.RFC3339)}
	if !l.Modified.IsZero() {
		doc.Updated = l.Modified.UTC().Format(time.RFC3339)
	}
	doc.File.Name = l.Name
	if l.Size >= 0 {
		doc.File.Size = &l.Size
	}
	for i, u := range l.URLs {
		mu := metalinkURL{Priority: min(i+1, maxMetalinkPriority), URL: u.URL}
		if loc := strings.ToLower(u.Location); len(loc) == 2 && loc[0] >= 'a' && loc[0] <= 'z' && loc[1] >= 'a' && loc[1] <= 'z' {
			mu.Location = loc
		}
		doc.File.URLs = append(doc.File.URLs, mu)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("api: mirror list: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// WriteMirrorText writes l as plain text: the URLs, best first, one a
// line.
func WriteMirrorText(w io.Writer, l MirrorList) error {
	if err := l.check(); err != nil {
		return err
	}
	var b strings.Builder
	for _, u := range l.URLs {
		b.WriteString(u.URL)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MirrorListParam is the query parameter that asks any mirror for the
// mirror list of the path (GET /pool/x.deb?mirrorlist), as MirrorBrain's
// and Mirrorbits' clients ask it; its value may be FormatParam's.
const MirrorListParam = "mirrorlist"

// WantsMetalink reports whether r asks for Metalink: ?format=metalink or
// ?mirrorlist=metalink, or an Accept that names its media type.
func WantsMetalink(r *http.Request) bool {
	q := r.URL.Query()
	for _, k := range []string{FormatParam, MirrorListParam} {
		if f := q.Get(k); f != "" {
			return f == "metalink"
		}
	}
	return strings.Contains(r.Header.Get("Accept"), MediaMetalink)
}

// ServeMirrorList answers r with l, as Metalink or plain text as r asks
// (WantsMetalink): 404 with a line of text when no member holds the file,
// 500 when l can not be written. It is never cached: the order is the
// policy's for this client, now.
func ServeMirrorList(w http.ResponseWriter, r *http.Request, l MirrorList) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept")
	if len(l.URLs) == 0 {
		http.Error(w, fmt.Sprintf("%s: no member holds it", l.Name), http.StatusNotFound)
		return
	}
	var b bytes.Buffer
	write, media := WriteMirrorText, MediaText
	if WantsMetalink(r) {
		write, media = WriteMetalink, MediaMetalink
	}
	if err := write(&b, l); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", media)
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}

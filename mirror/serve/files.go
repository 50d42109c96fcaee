package serve

import (
	"cmp"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxRanges is the most byte ranges one request may ask for
// (max_ranges, nginx's max_ranges) when FileServerOptions.MaxRanges is 0.
const DefaultMaxRanges = 16

// indexFile is served for a directory request when it exists.
const indexFile = "index.html"

// FileServerOptions configure a FileServer.
type FileServerOptions struct {
	// Listing turns on HTML listings of directories without index.html;
	// when off (the default) such directories answer 403.
	Listing bool
	// Logger receives unexpected file system errors (default: discard).
	Logger *slog.Logger
	// Cache, when not nil, serves small files from memory (see Cache).
	Cache *Cache
	// MaxRanges is the most byte ranges a Range header may ask for
	// (LimitRanges): 0 is DefaultMaxRanges, < 0 turns ranges off (every
	// file is served whole).
	MaxRanges int
}

// FileServer is an http.Handler that serves the files below a document
// root. Every open goes through an os.Root, so neither ".." nor a symbolic
// link can reach outside the root; symbolic links that stay inside are
// followed. Request paths are checked and normalized by CleanPath first.
//
// Only GET and HEAD are allowed (others: 405 with Allow). Regular files
// are served with http.ServeContent straight from the *os.File, so Range
// (also multipart/byteranges, at most MaxRanges ranges, coalesced by
// LimitRanges), If-Range, If-Modified-Since,
// If-Unmodified-Since, If-Match and If-None-Match work, and large files
// are streamed (sendfile on TCP), never read into memory.
//
// The ETag is strong, "<mtime in ns, hex>-<size, hex>" (as nginx does),
// so that If-Range works for resumed downloads. Mirror content is replaced
// by renaming a new file into place, which changes the mtime; a file
// rewritten in place to the same size within the file system's timestamp
// granularity would keep its ETag, which is accepted.
//
// Content-Type comes from a built-in table of extensions common on
// mirrors, then the mime package, then content sniffing; compressed files
// (.gz, .xz, ...) are served as what they are, never with a
// Content-Encoding. Every response carries X-Content-Type-Options: nosniff.
//
// A directory requested without a trailing slash is redirected (301, with
// a relative Location) to the same path with one; with a slash, its
// index.html is served, else a listing when configured, else 403. Error
// responses are the bare status text: they never show file system paths.
type FileServer struct {
	root    *os.Root
	listing bool
	log     *slog.Logger
	tmpl    *template.Template
	cache   *Cache
	ranges  int // the most ranges a request may ask for; < 1: none
}

var _ http.Handler = (*FileServer)(nil)

// NewFileServer opens the directory root and returns a FileServer for it.
// The directory is held open until Close: a root replaced by renaming
// another directory into its place is only seen by a new FileServer.
func NewFileServer(root string, o FileServerOptions) (*FileServer, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("mirror: open document root: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FileServer{
		root:    r,
		listing: o.Listing,
		log:     log,
		tmpl:    template.Must(template.New("listing").Parse(listingHTML)),
		cache:   o.Cache,
		ranges:  cmp.Or(o.MaxRanges, DefaultMaxRanges),
	}, nil
}

// Close closes the document root; requests in flight may fail after it.
func (s *FileServer) Close() error { return s.root.Close() }

// ServeHTTP serves the file or directory that the request path names.
func (s *FileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.fail(w, http.StatusMethodNotAllowed)
		return
	}
	escaped := r.URL.EscapedPath()
	name, isDir, err := CleanPath(escaped)
	switch {
	case errors.Is(err, ErrHiddenPath):
		s.fail(w, http.StatusNotFound)
		return
	case err != nil:
		s.fail(w, http.StatusBadRequest)
		return
	}
	fi, err := s.root.Stat(name)
	if err != nil {
		s.failFS(w, r, name, err)
		return
	}
	switch {
	case fi.IsDir() && !isDir:
		// Relative and prefixed with "./", so that neither "//host" nor
		// "scheme:" in a name can make it point elsewhere.
		loc := "./" + url.PathEscape(path.Base(name)) + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusMovedPermanently)
	case fi.IsDir():
		s.serveDir(w, r, name)
	case isDir || !fi.Mode().IsRegular():
		s.fail(w, http.StatusNotFound)
	default:
		s.serveFile(w, r, name)
	}
}

// serveFile serves the regular file name with http.ServeContent.
func (s *FileServer) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	f, err := s.root.Open(name)
	if err != nil {
		s.failFS(w, r, name, err)
		return
	}
	defer f.Close()
	// Stat the open file: the name may have been replaced since the Stat
	// in ServeHTTP, and only what was opened is served.
	fi, err := f.Stat()
	if err != nil {
		s.failFS(w, r, name, err)
		return
	}
	if !fi.Mode().IsRegular() {
		s.fail(w, http.StatusNotFound)
		return
	}
	if rng := r.Header.Get("Range"); rng != "" {
		// Memory hits take the same path: the cache is only the content.
		if fixed := LimitRanges(dropEmptySuffixRanges(rng, fi.Size()), fi.Size(), s.ranges); fixed != rng {
			r = r.Clone(r.Context())
			if fixed == "" {
				r.Header.Del("Range")
			} else {
				r.Header.Set("Range", fixed)
			}
		}
	}
	h := w.Header()
	h.Set("Etag", etag(fi))
	if ct := contentType(name); ct != "" {
		h.Set("Content-Type", ct)
	}
	var content io.ReadSeeker = servedFile{f}
	if s.cache != nil {
		content = s.cache.content(r.Context(), name, f, fi)
	}
	http.ServeContent(w, r, path.Base(name), fi.ModTime(), content)
}

// servedFile keeps the file's path out of responses: http.ServeContent
// writes the text of a failed Seek into its 500 response, and an
// *os.File's errors name the file's full path. Embedding keeps
// SyscallConn, so the body still goes out with sendfile.
type servedFile struct{ *os.File }

// Seek seeks the file; its error does not name the file.
func (f servedFile) Seek(offset int64, whence int) (int64, error) {
	n, err := f.File.Seek(offset, whence)
	if err != nil {
		return n, errors.New("mirror: cannot seek file")
	}
	return n, nil
}

// dropEmptySuffixRanges removes the suffix ranges of length zero ("-0")
// from a Range header: RFC 9110 (14.1.1) makes them unsatisfiable, but
// http.ServeContent answers them with an empty 206 and the invalid
// "Content-Range: bytes 100-99/100". When nothing else is left, the
// result is a range starting at size, which ServeContent answers with 416
// and "bytes */size" after evaluating the preconditions as usual.
func dropEmptySuffixRanges(h string, size int64) string {
	specs, ok := strings.CutPrefix(h, "bytes=")
	if !ok || !strings.Contains(specs, "-") {
		return h
	}
	kept := make([]string, 0, 4)
	dropped := false
	for spec := range strings.SplitSeq(specs, ",") {
		start, end, _ := strings.Cut(strings.TrimSpace(spec), "-")
		if strings.TrimSpace(start) == "" && strings.TrimLeft(strings.TrimSpace(end), "0") == "" && strings.TrimSpace(end) != "" {
			dropped = true
			continue
		}
		kept = append(kept, spec)
	}
	switch {
	case !dropped:
		return h
	case len(kept) == 0:
		return "bytes=" + strconv.FormatInt(size, 10) + "-"
	}
	return "bytes=" + strings.Join(kept, ",")
}

// etag returns the strong entity tag of a file: mtime and size in hex.
func etag(fi fs.FileInfo) string {
	return `"` + strconv.FormatInt(fi.ModTime().UnixNano(), 16) + "-" + strconv.FormatInt(fi.Size(), 16) + `"`
}

// contentType returns the media type of name by extension, or "" to let
// http.ServeContent sniff the content.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".json":
		return "application/json"
	case ".xml":
		return "application/xml"
	case ".txt", ".md", ".asc", ".sha256", ".sha512", ".md5":
		return "text/plain; charset=utf-8"
	case ".sig":
		return "application/pgp-signature"
	case ".iso":
		return "application/x-iso9660-image"
	case ".img", ".bin", ".qcow2", ".raw":
		return "application/octet-stream"
	case ".gz", ".tgz":
		return "application/gzip"
	case ".xz", ".txz":
		return "application/x-xz"
	case ".bz2", ".tbz":
		return "application/x-bzip2"
	case ".zst":
		return "application/zstd"
	case ".tar":
		return "application/x-tar"
	case ".zip":
		return "application/zip"
	case ".deb", ".udeb":
		return "application/vnd.debian.binary-package"
	case ".rpm":
		return "application/x-rpm"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".ico":
		return "image/vnd.microsoft.icon"
	}
	if ext == "" {
		return ""
	}
	return mime.TypeByExtension(ext)
}

// serveDir serves a directory requested with a trailing slash.
func (s *FileServer) serveDir(w http.ResponseWriter, r *http.Request, name string) {
	index := path.Join(name, indexFile)
	if fi, err := s.root.Stat(index); err == nil && fi.Mode().IsRegular() {
		s.serveFile(w, r, index)
		return
	}
	if !s.listing {
		s.fail(w, http.StatusForbidden)
		return
	}
	s.serveListing(w, r, name)
}

// listingHTML is the directory listing page; html/template escapes every
// name for its context (text and URL).
const listingHTML = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Index of {{.Path}}</title></head>
<body><h1>Index of {{.Path}}</h1>
<table>
<tr><th>Name</th><th>Size</th><th>Modified</th></tr>
{{- if .Parent}}
<tr><td><a href="../">../</a></td><td></td><td></td></tr>
{{- end}}
{{- range .Entries}}
<tr><td><a href="{{.Href}}">{{.Name}}</a></td><td>{{.Size}}</td><td>{{.Modified}}</td></tr>
{{- end}}
</table>
</body></html>
`

type listingEntry struct {
	Name, Href, Size, Modified string
}

// serveListing writes an HTML listing of the directory name. Entries
// starting with "." and symbolic links leading outside the root (or
// nowhere) are left out.
func (s *FileServer) serveListing(w http.ResponseWriter, r *http.Request, name string) {
	d, err := s.root.Open(name)
	if err != nil {
		s.failFS(w, r, name, err)
		return
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		s.failFS(w, r, name, err)
		return
	}
	entries := make([]listingEntry, 0, len(des))
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		fi, err := s.root.Stat(path.Join(name, n)) // follows links inside the root only
		if err != nil {
			continue
		}
		e := listingEntry{Name: n, Href: "./" + url.PathEscape(n), Modified: fi.ModTime().UTC().Format(time.DateTime)}
		switch {
		case fi.IsDir():
			e.Name += "/"
			e.Href += "/"
			e.Size = "-"
		case fi.Mode().IsRegular():
			e.Size = strconv.FormatInt(fi.Size(), 10)
		default:
			continue
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b listingEntry) int { return strings.Compare(a.Name, b.Name) })
	p := "/"
	if name != "." {
		p = "/" + name + "/"
	}
	var b strings.Builder
	err = s.tmpl.Execute(&b, struct {
		Path    string
		Parent  bool
		Entries []listingEntry
	}{p, name != ".", entries})
	if err != nil {
		s.log.Error("directory listing failed", "path", p, "err", err)
		s.fail(w, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(b.String()))
	}
}

// failFS answers a file system error: 403 for permission, 503 when the
// process is out of file descriptors or memory, 500 (logged) for I/O
// errors, and 404 for everything else, including names that do not exist,
// paths through a file, links that loop or escape the root.
func (s *FileServer) failFS(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, fs.ErrPermission):
		s.fail(w, http.StatusForbidden)
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM):
		s.log.Warn("cannot open file", "path", name, "err", err)
		s.fail(w, http.StatusServiceUnavailable)
	case errors.Is(err, syscall.EIO):
		s.log.Error("cannot read file", "path", name, "err", err)
		s.fail(w, http.StatusInternalServerError)
	default:
		s.log.Debug("not found", "path", name, "method", r.Method, "err", err)
		s.fail(w, http.StatusNotFound)
	}
}

// fail writes the bare status text of code.
func (s *FileServer) fail(w http.ResponseWriter, code int) {
	h := w.Header()
	h.Del("Etag")
	h.Del("Last-Modified")
	http.Error(w, http.StatusText(code), code)
}

// Size returns the size of the regular file that the escaped request path
// names; a path that is bad, missing or a directory counts as size 0: it
// is answered by a small error or listing.
func (fs *FileServer) Size(escapedPath string) int64 {
	size, _, _ := fs.Stat(escapedPath)
	return size
}

// Stat returns the size and modification time of the regular file that
// the escaped request path names; ok is false for a path that is bad,
// missing or not a regular file.
func (fs *FileServer) Stat(escapedPath string) (size int64, modTime time.Time, ok bool) {
	name, isDir, err := CleanPath(escapedPath)
	if err != nil || isDir {
		return 0, time.Time{}, false
	}
	fi, err := fs.root.Stat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, time.Time{}, false
	}
	return fi.Size(), fi.ModTime(), true
}

// Command mkmmdb makes a small GeoIP2-layout MaxMind DB from a CSV
// networks table, for tests and demos:
//
//	mkmmdb -in table.csv -out file.mmdb [-type GeoIP2-City]
//	mkmmdb -version    print the version on one line and exit 0
//
// The table has the header network,country,continent,lat,lon and one
// network a line (see geo.ReadRows). The output is written to a temporary
// file beside -out and renamed into place, so a reader never sees half a
// database. The same table always makes the same bytes.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/scheduler/geo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is mkmmdb with its arguments; it returns the exit status: 0 done,
// 1 failed, 2 bad usage. Only -version writes to stdout.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mkmmdb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "CSV networks table to read (required)")
	out := fs.String("out", "", "MaxMind DB file to write (required)")
	dbType := fs.String("type", geo.TypeCity, "database type written into the metadata: a City or Country type")
	var version bool
	buildinfo.Flag(fs, &version)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mkmmdb -in table.csv -out file.mmdb [-type "+geo.TypeCity+"]\n       mkmmdb -version")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if version && fs.NArg() == 0 {
		fmt.Fprintln(stdout, buildinfo.Version("mkmmdb"))
		return 0
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := makeDB(*in, *out, *dbType); err != nil {
		fmt.Fprintln(stderr, "mkmmdb:", err)
		return 1
	}
	return 0
}

func makeDB(in, out, dbType string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	rows, err := geo.ReadRows(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	var buf bytes.Buffer
	if err := geo.WriteMMDB(&buf, dbType, rows); err != nil {
		return err
	}
	return writeAtomic(out, buf.Bytes())
}

// writeAtomic writes data to a temporary file beside path and renames it
// into place.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

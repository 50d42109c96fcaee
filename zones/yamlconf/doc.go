// Package yamlconf is the one config layer of dnsd and the mirror: strict,
// positioned YAML decoding, one error collector, and the value types that
// both config files share.
//
// [Decode] decodes a config file into a struct with unknown keys refused,
// refuses more than one YAML document and any YAML tag, turns a panic of
// the YAML decoder into an error, and returns the [Positions] of every key
// and value, so that validation can say where a key path was written.
// Every error it returns is one line of the form
//
//	FILE:LINE:COL: KEY.PATH: what
//
// [Errors] collects the errors of one file's validation, each prefixed
// with the file:line:col of the key path it is about and naming its object,
// either by the message itself (dnsd: `group "www": member "fra1": capacity
// must be > 0`) or by the key path ([Errors.KeyErrorf], the mirror:
// `capacity: must be > 0, got 0`), and joins them with errors.Join.
//
// The rules both config files follow live here too: [Default] is the
// rule for zero (a key left out takes its default, a key written is
// taken as written, 0 included); [Secret] is every secret's one key, the
// secret itself or {file: PATH}, read by [Secret.Read] with the warning
// of [ReadSecretFile] for a file others can read; [Retired] keys (old
// names, *_file twins, keys moved out of the config) are refused by
// [Decode] with an error that says what to write instead.
//
// The shared value types are [Duration] ("10s"), [ByteSize] ("512MiB"),
// [Bandwidth] ("1Gbit/s", "100MB/s"), [Location] and the geo block [Geo]
// with its [Network] rows; [Geo.Check], [Location.Check] and
// [Bandwidth.Check] validate and normalise them the same way in both
// daemons, with the same errors; [IsMemberName] is the syntax of a
// member's name in both. scheduler/geo builds a locator from a checked
// Geo.
//
// The package imports nothing of transmirror and only a YAML library
// besides the standard library, so that every other package may use it.
package yamlconf

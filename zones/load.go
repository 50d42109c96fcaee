package zones

import (
	"fmt"
	"os"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Load reads the config file at path, decodes it strictly and builds the
// Set it describes (see Parse and Build).
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return Build(cfg)
}

// Parse decodes data, the YAML text of the config file named file, into a
// Config with yamlconf.Decode: unknown keys, wrong types, syntax errors,
// YAML tags, more than one document and retired keys (admin_token_file:
// "write admin_token: {file: PATH}") are errors of the form
// "FILE:LINE:COL: KEY.PATH: what". The Config remembers where each of its
// objects was written, so that Build can name file:line:col in its errors;
// nothing is defaulted or validated here.
func Parse(file string, data []byte) (*Config, error) {
	cfg := &Config{}
	pos, err := yamlconf.Decode(file, data, cfg, retiredKeys...)
	if err != nil {
		return nil, err
	}
	cfg.File, cfg.pos = file, pos
	return cfg, nil
}

package yamlconf

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
)

// Secret is a secret or token of a config file, written in one of two
// forms under one key: the secret itself, a string
//
//	secret: s3cret
//
// or a mapping that names the file holding it, relative to the config
// file's directory
//
//	secret: {file: www.secret}
//
// [Secret.Read] returns the secret either way. The zero Secret is a key
// left out (or written as ""): no secret.
type Secret struct {
	// Value is the secret written inline ("" when it was not).
	Value string
	// File is the file named by {file: PATH}, as written ("" when the
	// secret was written inline).
	File string

	noFile bool // written as a mapping without a file: an error of Read
}

// IsZero reports whether no secret was given.
func (s Secret) IsZero() bool { return s.Value == "" && s.File == "" && !s.noFile }

// errSecretForm is the error of a secret that is neither a string nor
// {file: PATH}.
var errSecretForm = errors.New("want the secret as a string or {file: PATH}")

// UnmarshalYAML decodes a string, or a mapping whose only key is file
// (strictly: any other key is an error, with its position).
func (s *Secret) UnmarshalYAML(unmarshal func(any) error) error {
	var str string
	if err := unmarshal(&str); err == nil {
		*s = Secret{Value: str}
		return nil
	}
	var m struct {
		File string `yaml:"file"`
	}
	if err := unmarshal(&m); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return errSecretForm
		}
		return err
	}
	*s = Secret{File: m.File, noFile: m.File == ""}
	return nil
}

// Read returns the secret: Value, or the contents of File (resolved
// against dir, the config file's directory) with white space trimmed.
// For a file, warning is what [ReadSecretFile] says of its mode, and an
// empty file is an error; every error names the file as written.
func (s Secret) Read(dir string) (secret, warning string, err error) {
	if s.noFile {
		return "", "", errors.New("{file: PATH} without a PATH")
	}
	if s.File == "" {
		return s.Value, "", nil
	}
	secret, warning, err = ReadSecretFile(Resolve(dir, s.File), s.File)
	if err != nil {
		return "", "", fmt.Errorf("file %s: %w", s.File, WithoutPath(err))
	}
	if secret == "" {
		return "", warning, fmt.Errorf("file %s is empty", s.File)
	}
	return secret, warning, nil
}

// String shows where the secret comes from and never the secret itself.
func (s Secret) String() string {
	switch {
	case s.File != "":
		return "{file: " + s.File + "}"
	case s.Value != "":
		return "<redacted>"
	}
	return ""
}

package group

import (
	"encoding/json"
	"io"
)

// testGroup is the group name of the tests' views and mirrors.
const testGroup = "www.example.test"

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Round2 rounds a figure for display to two decimals; infinities and NaN
// stay as they are.
func Round2(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	return math.Round(x*100) / 100
}

// JSONErrorAt describes a JSON decoding error of data with the line and
// column where it happened ("line 3, column 14: ..."), or as it is when
// the error has no offset.
func JSONErrorAt(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range data[:min(int(off), len(data))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

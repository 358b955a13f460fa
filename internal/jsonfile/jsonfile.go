// Package jsonfile writes a value as an indented JSON file: sim.json and a
// simulation's summary.json (package sim), and `lockproof check --json`.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// Write writes v as indented JSON to p, without a trailing newline.
func Write(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

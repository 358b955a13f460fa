package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// Writer writes a JSON Lines history. It buffers: call Flush when done. A
// Writer is not safe for concurrent use; Recorder is.
type Writer struct {
	bw  *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 64<<10)}
}

// WriteOp validates op (see Op.Validate) and appends it as one line. An
// invalid op is not written: its *ParseError is returned.
func (w *Writer) WriteOp(op Op) error {
	if err := op.Validate(); err != nil {
		return fmt.Errorf("write op: %w", err)
	}
	w.buf = append(AppendJSON(w.buf[:0], op), '\n')
	if _, err := w.bw.Write(w.buf); err != nil {
		return fmt.Errorf("write op: %w", err)
	}
	return nil
}

// Flush writes any buffered lines to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("flush history: %w", err)
	}
	return nil
}

// WriteFile writes ops as a history file at path, replacing it.
func WriteFile(path string, ops []Op) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("write history: %w", cerr))
		}
	}()
	w := NewWriter(f)
	for i, op := range ops {
		if err := w.WriteOp(op); err != nil {
			return fmt.Errorf("%s: op %d: %w", path, i, err)
		}
	}
	return w.Flush()
}

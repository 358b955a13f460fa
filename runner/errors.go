package runner

import "errors"

// ErrBadConfig wraps every error about bad matrix input (flags, names,
// seed lists, regression files).
var ErrBadConfig = errors.New("bad matrix config")

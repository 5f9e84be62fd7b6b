//go:build !linux

package probe

import (
	"errors"
	"os"
)

// The probes run in sandboxes, which are Linux; elsewhere these report
// that they cannot.

func kernelLog() string { return "" }

func statSpace(string) (Space, error) { return Space{}, errors.ErrUnsupported }

func allocate(*os.File, int64) error { return errors.ErrUnsupported }

func fork() (int, error) { return 0, errors.ErrUnsupported }

func errnoName(err error) string { return err.Error() }

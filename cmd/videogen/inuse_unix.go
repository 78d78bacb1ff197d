//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// sqliteDMSByte is where in a WAL database's -shm file every connection holds a shared lock for as long
// as it is open (SQLite's unix VFS: UNIX_SHM_DMS, after the eight WAL-index locks at 120).
const sqliteDMSByte = 128

// sqliteInUse reports whether another process has the SQLite database at path open, by asking the
// kernel whether a write lock on its -shm file's DMS byte would conflict. It must run before this
// process opens the database: closing the file here drops every POSIX lock this process holds on it.
func sqliteInUse(path string) (bool, error) {
	f, err := os.OpenFile(path+"-shm", os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // no connection has it open in WAL mode
	}
	if err != nil {
		return false, fmt.Errorf("check whether %s is in use: %w", path, err)
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: sqliteDMSByte, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false, fmt.Errorf("check whether %s is in use: %w", path, err)
	}
	return lk.Type != syscall.F_UNLCK, nil
}

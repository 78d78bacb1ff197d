package testkit

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// OpenAINodeDir is the folder of the OpenAI Node SDK the tests drive (package.json and its lock file pin
// the version; `make test` installs node_modules there with npm ci), and of sdk_check.mjs. The test fails
// when the SDK is not installed: a skipped SDK check would hide a gap.
func OpenAINodeDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "testdata", "openai-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("the OpenAI Node SDK is not installed in %s (make test-deps installs it): %v", dir, err)
	}
	return dir
}

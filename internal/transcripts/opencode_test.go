package transcripts

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ocStorage is the hand-made opencode storage directory of the golden tests.
const ocStorage = "testdata/transcripts/opencode/storage-openai"

// copyDir copies a directory tree into a temporary directory and returns the copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// envelopes returns the native-form envelopes of a session.
func envelopes(t *testing.T, s *Session) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteEnvelopes(&buf, s, s.Native, nil); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestOpencodeEntryPoints: the storage directory, the data directory holding it, the session
// file and the message/<sessionID> directory all import the same session.
func TestOpencodeEntryPoints(t *testing.T) {
	sessions := OpencodeSessionFiles(ocStorage)
	if len(sessions) != 1 {
		t.Fatalf("session files %v", sessions)
	}
	want, err := ImportFile(ocStorage, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if want.Native != OpenAI || want.Format != FormatOpencode {
		t.Fatalf("native %s format %s", want.Native, want.Format)
	}
	sid := strings.TrimSuffix(filepath.Base(sessions[0]), ".json")
	data := copyDir(t, ocStorage)
	if err := os.Rename(data, filepath.Join(filepath.Dir(data), "storage")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sessions[0], filepath.Join(ocStorage, "message", sid), filepath.Dir(data)} {
		s, err := ImportFile(p, FormatAuto)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if envelopes(t, s) != envelopes(t, want) {
			t.Errorf("%s imports differently from the storage directory", p)
		}
	}
}

// TestOpencodeStorageFilesNeedTheirDirectory: a storage file given as bytes says how to import it.
func TestOpencodeStorageFilesNeedTheirDirectory(t *testing.T) {
	sessions := OpencodeSessionFiles(ocStorage)
	msgs, _ := filepath.Glob(filepath.Join(ocStorage, "message", "*", "*.json"))
	parts, _ := filepath.Glob(filepath.Join(ocStorage, "part", "*", "*.json"))
	for _, p := range []string{sessions[0], msgs[0], parts[0]} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Import(p, data, FormatAuto)
		if !errors.Is(err, errOpencodeFile) {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := ImportFile(msgs[0], FormatAuto); !errors.Is(err, errOpencodeFile) {
		t.Errorf("message file by path: %v", err)
	}
}

// TestOpencodeBadFilesAreSkipped: a message or part file that does not parse is skipped with a
// warning naming it; strict fails on it; a storage with several sessions asks for one.
func TestOpencodeBadFilesAreSkipped(t *testing.T) {
	dir := copyDir(t, ocStorage)
	parts, _ := filepath.Glob(filepath.Join(dir, "part", "*", "*.json"))
	if err := os.WriteFile(parts[3], []byte(`{"id": "prt_x", "type": `), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ImportFile(dir, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || s.Warnings[0].File != parts[3] {
		t.Fatalf("warnings %v", s.Warnings)
	}
	if _, err := ImportFileWith(dir, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "truncated JSON document") {
		t.Fatalf("strict: %v", err)
	}
	sessions := OpencodeSessionFiles(dir)
	other := filepath.Join(filepath.Dir(sessions[0]), "ses_0000000000000other.json")
	if err := os.WriteFile(other, []byte(`{"id":"ses_0000000000000other","projectID":"p","directory":"/w"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportFile(dir, FormatAuto); err == nil || !strings.Contains(err.Error(), "holds 2 sessions") {
		t.Fatalf("two sessions: %v", err)
	}
	if _, err := ImportFile(other, FormatAuto); !errors.Is(err, ErrEmpty) {
		t.Fatalf("session without messages: %v", err)
	}
}

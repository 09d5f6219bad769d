package task

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Token is one line of a token file: a name, its role, the hex SHA-256
// of its secret token, and the OS user its holder is, when the line
// names one.
type Token struct {
	Name string
	Role Role
	Hash [sha256.Size]byte
	// OS is the line's os=USER, "" without: the OS user the token's
	// holder is, so that four eyes knows them for one person
	// (SamePerson).
	OS string
	// Line is the line's number in its file, from 1.
	Line int
}

// Tokens are the identities of a token file, looked up by token.
type Tokens []Token

// ErrUnsafeTokenFile is wrapped by ReadTokenFile and AddToken for a token
// file that is not a regular file, or that users other than its owner
// (and its group, for reading) may read or change.
var ErrUnsafeTokenFile = errors.New("unsafe token file")

// ErrTokenRefused is wrapped by AddToken when it writes nothing because
// the name, the OS user or the file is wrong: a bad or taken name, a file
// that does not parse, cannot be opened, or is unsafe (then
// ErrUnsafeTokenFile too).
var ErrTokenRefused = errors.New("token refused")

// ParseTokens reads a token file: one identity a line, "NAME ROLE
// SHA256-OF-TOKEN [os=USER]" separated by blanks (the hash as 64 hex
// digits, of the token's bytes, as sha256sum prints it; os=USER, when
// given, the OS user the token's holder is, for four eyes); a # at the
// start of a line or after a blank begins a comment to the end of the
// line, and blank lines are ignored. A line of another shape, an unknown
// role, a name or a hash given twice, a name with a control character or
// bytes that are not UTF-8, and a UTF-8 byte order mark (which an editor
// may add, and which would be part of the first name, unseen) are errors
// naming the line, and no token is returned: a file half understood would
// let someone in, or keep them out, unnoticed.
func ParseTokens(r io.Reader) (Tokens, error) {
	var out Tokens
	names, hashes := map[string]int{}, map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.ContainsRune(line, '\uFEFF') {
			return nil, fmt.Errorf("line %d: a UTF-8 byte order mark (EF BB BF): save the file as plain UTF-8 without it", n)
		}
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("line %d: want NAME ROLE SHA256-OF-TOKEN [os=USER], got %d fields", n, len(f))
		}
		if err := checkTokenWord("name", f[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		role, err := ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		raw, err := hex.DecodeString(strings.ToLower(f[2]))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: %q is not a SHA-256 in hex (64 digits): put the token's hash, as sha256sum prints it, not the token", n, f[2])
		}
		t := Token{Name: f[0], Role: role, Line: n}
		copy(t.Hash[:], raw)
		if len(f) == 4 {
			osUser, ok := strings.CutPrefix(f[3], "os=")
			if !ok || osUser == "" {
				return nil, fmt.Errorf("line %d: %q: want os=USER, the OS user the token's holder is", n, f[3])
			}
			if err := checkTokenWord("os user", osUser); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			t.OS = osUser
		}
		if prev, ok := names[t.Name]; ok {
			return nil, fmt.Errorf("line %d: name %q already on line %d", n, t.Name, prev)
		}
		if prev, ok := hashes[t.Hash]; ok {
			return nil, fmt.Errorf("line %d: the same token hash as line %d", n, prev)
		}
		names[t.Name], hashes[t.Hash] = n, n
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return out, nil
}

// checkTokenWord refuses a name or OS user a token line cannot hold, or
// that would not read as what it is: empty, not UTF-8, with a blank, a
// control or format character (invisible), or a # (a comment).
func checkTokenWord(what, s string) error {
	if s == "" || !utf8.ValidString(s) {
		return fmt.Errorf("%s %q: want a word of printable UTF-8", what, s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '#' {
			return fmt.Errorf("%s %q: %U is not allowed in it (blanks, control and invisible characters and # are not)", what, s, r)
		}
	}
	return nil
}

// ErrUnknownToken is returned by Tokens.Identify for a token no line has.
var ErrUnknownToken = errors.New("unknown token")

// Identify returns the identity (Via ledger.AuditHTTP, Name "token:NAME",
// OS the line's os=) whose hash is the SHA-256 of token, comparing every
// line in constant time; an empty token or one no line has fails with
// ErrUnknownToken.
func (ts Tokens) Identify(token string) (Identity, error) {
	if token == "" {
		return Identity{}, ErrUnknownToken
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, t := range ts {
		if subtle.ConstantTimeCompare(sum[:], t.Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrUnknownToken
	}
	t := ts[found]
	return Identity{Name: RealmToken + ":" + t.Name, OS: t.OS, Role: t.Role, Via: ledger.AuditHTTP}, nil
}

// ReadTokenFile reads the token file at path (ParseTokens). It is refused,
// wrapping ErrUnsafeTokenFile, when it is not a regular file (a FIFO is
// opened without blocking and refused, never waited on), or when its mode
// lets every user read it or anyone but its owner change it: the file
// decides who may act on the queue, and its hashes are a guess away from
// a weak token. Errors name the file, on one line.
func ReadTokenFile(path string) (Tokens, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close() // read only
	if err := checkTokenFile(path, f); err != nil {
		return nil, err
	}
	ts, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return ts, nil
}

// checkTokenFile refuses the open file f at path unless it is a regular
// file that only its owner may change and not everyone may read.
func checkTokenFile(path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return tagged{fmt.Errorf("token file %s: a %s, not a regular file", path, queue.ModeType(fi.Mode())), ErrUnsafeTokenFile}
	}
	switch perm := fi.Mode().Perm(); {
	case perm&0o004 != 0:
		return tagged{fmt.Errorf("token file %s: mode %04o lets every user read it. Try: chmod 600 %s", path, perm, path), ErrUnsafeTokenFile}
	case perm&0o022 != 0:
		return tagged{fmt.Errorf("token file %s: mode %04o lets users other than its owner change it. Try: chmod 600 %s", path, perm, path), ErrUnsafeTokenFile}
	}
	return nil
}

// tagged is err, which also matches tag (errors.Is) without saying so
// in its text.
type tagged struct{ err, tag error }

func (t tagged) Error() string   { return t.err.Error() }
func (t tagged) Unwrap() []error { return []error{t.err, t.tag} }

// refused tags err with ErrTokenRefused.
func refused(err error) error { return tagged{err, ErrTokenRefused} }

// AddToken makes a new random token for name with role, and the OS user
// osUser its holder is ("" for none), appends its line "NAME ROLE
// SHA256-OF-TOKEN [os=USER]" to the token file at path, and returns the
// token: the only time it exists outside its holder's hands, since the
// file keeps its hash alone. The file is created with mode 0600 when
// missing; an existing one must be safe (as ReadTokenFile) and parse. A
// name already in the file, compared without case (one person), is
// refused. Concurrent adds to one file take turns on an flock of it; the
// line is appended in one write with O_APPEND and fsynced (and, for a new
// file, its directory too) before the token is returned.
func AddToken(path, name string, role Role, osUser string) (_ string, err error) {
	if err := checkTokenWord("name", name); err != nil {
		return "", refused(fmt.Errorf("token file %s: %w", path, err))
	}
	if role == RoleNone {
		return "", refused(fmt.Errorf("token file %s: a token needs a role: viewer, operator or approver", path))
	}
	if osUser != "" {
		if err := checkTokenWord("os user", osUser); err != nil {
			return "", refused(fmt.Errorf("token file %s: %w", path, err))
		}
	}
	const flags = os.O_RDWR | os.O_APPEND | syscall.O_NONBLOCK
	created := true
	f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		created = false
		f, err = os.OpenFile(path, flags, 0)
	}
	if err != nil {
		return "", refused(fmt.Errorf("token file: %w", err))
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("token file %s: close: %w", path, cerr)
		}
	}()
	if err := checkTokenFile(path, f); err != nil {
		return "", refused(err)
	}
	// Released by Close.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("token file %s: lock: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	old, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	ts, err := ParseTokens(bytes.NewReader(old))
	if err != nil {
		return "", refused(fmt.Errorf("token file %s: %w (fix it before adding to it)", path, err))
	}
	for _, t := range ts {
		if strings.EqualFold(t.Name, name) {
			return "", refused(fmt.Errorf("token file %s: name %q is on line %d already: one name, one token (remove the line to replace its token)", path, t.Name, t.Line))
		}
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(token))
	line := fmt.Sprintf("%s %s %s", name, role, hex.EncodeToString(sum[:]))
	if osUser != "" {
		line += " os=" + osUser
	}
	line += "\n"
	if len(old) > 0 && old[len(old)-1] != '\n' {
		// The last line is not cut: the new one would join it.
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		return "", fmt.Errorf("token file %s: append: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("token file %s: fsync: %w", path, err)
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return "", fmt.Errorf("token file %s: %w", path, err)
		}
	}
	return token, nil
}

// syncDir fsyncs the directory at dir, so that a new entry in it survives
// a power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close() // the error that matters is Sync's
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return d.Close()
}

package admin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestImpostorServerIsRefused: in a data directory another account can
// write to (an operator's mistake), that account can put its own socket at
// D/admin.sock while no server runs. It answers the ping like the real
// server (it can stat D too) and would receive the auditors' requests and
// answer them with forged results ("ok": true). The command refuses it
// before sending anything: the kernel says which uid answers, and it is
// neither root nor the owner of D/audit.db.
//
// The impostor runs as nobody (setpriv), so the test needs root.
func TestImpostorServerIsRefused(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs root and setpriv (util-linux) to run the impostor as another uid (CI=true: a missing dependency fails): uid %d, %v", os.Getuid(), err)
		}
		t.Skip("needs root and setpriv to run the impostor as another uid")
	}
	for _, swap := range []bool{false, true} {
		t.Run(map[bool]string{false: "beside root's log", true: "with a log of its own put in its place"}[swap], func(t *testing.T) {
			impostor(t, setpriv, swap)
		})
	}
}

// impostor runs the impostor as uid 65534 in a data directory open to
// all, root's; with swap, it first moves the audit log aside and puts one
// it owns in its place (owning the log proves nothing), then dials.
func impostor(t *testing.T, setpriv string, swap bool) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The mistake: the data directory (and the way to it) open to all.
	for _, d := range []string{filepath.Dir(base), base, dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.db"), nil, 0o600); err != nil { // root's log
		t.Fatal(err)
	}
	// The impostor: this test binary as nobody, from a copy it can run.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "impostor.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestImpostorHelper$")
	cmd.Env = append(os.Environ(), "CUSTOS_ADMIN_IMPOSTOR_DIR="+dir)
	if swap {
		cmd.Env = append(cmd.Env, "CUSTOS_ADMIN_IMPOSTOR_SWAP=1")
	}
	cmd.Stderr = os.Stderr
	// The impostor says on fd 3 when it listens: its socket file exists
	// from bind(2) on, before listen(2), and a Dial in between is refused
	// (ErrNoAnswer), which a wait for the file alone let happen at load.
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, err := bufio.NewReader(ready).ReadString('\n'); line != impostorListening {
		t.Fatalf("the impostor did not say it listens: %q, %v", line, err)
	}
	c, err := Dial(context.Background(), Path(dir))
	if c != nil {
		c.Close()
	}
	if !errors.Is(err, ErrOtherServer) {
		t.Fatalf("Dial to a socket served by nobody (uid 65534) in root's data directory: %v, want ErrOtherServer", err)
	}
}

// TestImpostorHelper is the impostor of TestImpostorServerIsRefused when
// run with CUSTOS_ADMIN_IMPOSTOR_DIR; otherwise it does nothing.
func TestImpostorHelper(t *testing.T) {
	dir := os.Getenv("CUSTOS_ADMIN_IMPOSTOR_DIR")
	if dir == "" {
		return
	}
	if os.Getenv("CUSTOS_ADMIN_IMPOSTOR_SWAP") == "1" {
		log := filepath.Join(dir, "audit.db")
		if err := os.Rename(log, log+".aside"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hs := fakeServer(t, dir, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", TrailerResult)
		w.Write([]byte(`{"ok":true,"summary":{},"problems":[]}` + "\n"))
		w.Header().Set(TrailerResult, `{"access_seq":1}`)
	})
	if _, err := os.NewFile(3, "ready").WriteString(impostorListening); err != nil {
		t.Fatal(err)
	}
	hs.Serve(hs.ln)
}

// impostorListening is what the impostor writes on fd 3 once it listens.
const impostorListening = "listening\n"

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/component-base/cli"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

// kcmSubcommand is argv[1] when this binary is re-executed as the controller
// manager. It runs as a child process rather than in the API server's process
// because both components install process-wide signal handlers and register
// global flags, and each refuses to share them.
const kcmSubcommand = "kube-controller-manager"

// kcmUser authenticates the controller manager. It is in system:masters
// because the alternative, per-controller service-account credentials, needs
// the token controllers running first; this is a test harness, not a cluster
// to defend. It is deliberately not one of the identities handed to tests.
var kcmUser = identity{User: "system:kube-controller-manager", Groups: []string{"system:masters"}}

func runControllerManager(args []string) int {
	cmd := kcmapp.NewControllerManagerCommand()
	cmd.SetArgs(args)
	cmd.SetOut(os.Stderr)
	cmd.SetErr(os.Stderr)
	return cli.Run(cmd)
}

func newKCMToken() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("cannot generate a token: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// controllerManager is the running child process.
type controllerManager struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startControllerManager re-executes this binary as kube-controller-manager
// running only the named controllers against server. It returns once the
// process has started; controllers act asynchronously anyway, so tests poll
// for their effects rather than for a readiness signal.
func startControllerManager(dir, server, caFile, saKeyFile, token string, controllers []string) (*controllerManager, error) {
	kubeconfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %q
    certificate-authority: %q
users:
- name: kcm
  user:
    token: %q
contexts:
- name: kcm
  context: {cluster: local, user: kcm}
current-context: kcm
`, server, caFile, token)
	if err := writeFileAtomic(kubeconfig, []byte(doc), 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this executable to start the controller manager: %w", err)
	}
	cmd := exec.Command(self, kcmSubcommand,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		// One instance, no competitor: electing a leader only adds seconds of
		// startup and a Lease the tests would have to ignore.
		"--leader-elect=false",
		// Nothing scrapes its metrics or health, and an unused port is one more
		// thing that can collide.
		"--secure-port=0",
		// What Pods get as a service account's identity: the
		// root-ca-certificate-publisher puts this CA (the API server's) into
		// every namespace's kube-root-ca.crt ConfigMap, which each Pod's
		// projected token volume mounts, and the token controller signs
		// legacy token Secrets with the API server's own key. Unused unless
		// those controllers are named.
		"--root-ca-file="+caFile,
		"--service-account-private-key-file="+saKeyFile,
	)
	// Keep stdout for the state document alone.
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// Its own process group keeps the launcher's SIGTERM and a terminal's
	// Ctrl-C away from it: only this process stops it, after the API server,
	// so a controller manager exiting on such a signal can never be mistaken
	// for a crash. Pdeathsig kills it if this process is killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the controller manager: %w", err)
	}
	cm := &controllerManager{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cm.err = cmd.Wait()
		close(cm.exited)
	}()
	log.Printf("kube-controller-manager started (pid %d) with %s", cmd.Process.Pid, strings.Join(controllers, ","))
	return cm, nil
}

// stop asks the controller manager to exit and waits for it, killing it
// after grace.
func (cm *controllerManager) stop(grace time.Duration) {
	select {
	case <-cm.exited:
		return
	default:
	}
	if err := cm.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Printf("cannot signal the controller manager: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	select {
	case <-cm.exited:
	case <-ctx.Done():
		log.Printf("kube-controller-manager did not stop within %s; killing it", grace)
		_ = cm.cmd.Process.Kill()
		<-cm.exited
	}
}

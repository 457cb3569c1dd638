package main

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
)

// nodeComponents are the node's programs, run as `controlplane NAME FLAGS...`.
// They live in this binary because no registry this project reaches ships
// them, and one binary built from one module keeps every component at exactly
// the API server's version with one build cache. Unlike the controller
// manager, the harness never starts them itself: the lab does, once the node's
// bridge, certificates and container runtime exist (lab/cluster). Each runs in
// a process of its own because each installs process-wide signal handlers and
// registers global flags.
var nodeComponents = map[string]func() *cobra.Command{
	"kube-scheduler": func() *cobra.Command { return schedulerapp.NewSchedulerCommand() },
	"kube-proxy":     func() *cobra.Command { return proxyapp.NewProxyCommand() },
	"kubelet":        func() *cobra.Command { return kubeletapp.NewKubeletCommand(context.Background()) },
}

func runNodeComponent(newCommand func() *cobra.Command, args []string) int {
	cmd := newCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

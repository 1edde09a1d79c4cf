// Package deploy holds Flotilla's Helm charts and hands them out as loaded
// charts, so binaries install exactly the chart they were built with.
//
// charts/flotilla installs the controller (flotilla-worker) into a management
// cluster; charts/flotilla-agent installs the agent (flotilla-worker agent)
// into a workload cluster. The controller installs the agent chart itself
// through AgentChart; users install either chart with `helm install`. Each
// chart's README.md lists its values.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// Paths of the charts inside the embedded file systems.
const (
	agentChartDir      = "charts/flotilla-agent"
	controllerChartDir = "charts/flotilla"
)

// The "all:" prefix embeds files starting with "_", such as _helpers.tpl.
// These file systems are read-only, so sharing them is safe.
var (
	//go:embed all:charts/flotilla-agent
	agentChartFS embed.FS
	//go:embed all:charts/flotilla
	controllerChartFS embed.FS
)

// AgentChart returns the flotilla-agent chart. Every call returns a new
// chart, which the caller may modify.
func AgentChart() (*chart.Chart, error) {
	return loadChart(agentChartFS, agentChartDir)
}

// ControllerChart returns the flotilla (controller) chart. Every call
// returns a new chart, which the caller may modify.
func ControllerChart() (*chart.Chart, error) {
	return loadChart(controllerChartFS, controllerChartDir)
}

// loadChart loads the chart in directory dir of fsys.
func loadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(name, dir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded chart %s: %w", path.Base(dir), err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load embedded chart %s: %w", path.Base(dir), err)
	}
	return c, nil
}

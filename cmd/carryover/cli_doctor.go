package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/doctor"
	"github.com/carryover/carryover/server"
)

// doctorCmd checks this host against what the configuration asks of it (internal/doctor) and
// exits 1 when a check fails, so a provisioning script can stop on it.
func doctorCmd() *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host for what carryover needs (sandbox, kernel, disk, store) and how to fix what is missing",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.Load(file, cmd.Flags())
			if err != nil {
				return err
			}
			r := doctor.Run(cmd.Context(), server.DoctorOptions(cfg))
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"checks": r, "failed": r.Failed()}); err != nil {
					return err
				}
			} else {
				r.Print(cmd.OutOrStdout())
			}
			if r.Failed() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "YAML config file (see configs/carryover.yaml)")
	cmd.Flags().String("data_dir", "./data", "database and workspaces directory")
	cmd.Flags().String("sandbox.bwrap", "bwrap", "bubblewrap binary")
	cmd.Flags().String("kernel.python", "/usr/bin/python3", "Python interpreter for kernels")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

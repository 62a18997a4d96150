package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/carryover/carryover/client"
)

// keysCmd manages API keys (admin scope: the server's auth.token or an admin key).
func (c *cli) keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Create, list and revoke API keys (needs an admin token)"}
	var req client.CreateKeyRequest
	var expires string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key; prints its secret (shown this once) alone on stdout",
		Long: "Create an API key for a tenant. The secret is printed alone on stdout, so that\n" +
			"  export CARRYOVER_TOKEN=$(carryover keys create --tenant acme --scope run)\n" +
			"works; what was created goes to stderr. The server keeps only a hash: a lost secret\n" +
			"cannot be shown again, only revoked and replaced.",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if expires != "" {
				t, err := expiryOf(expires, time.Now())
				if err != nil {
					return err
				}
				req.ExpiresAt = &t
			}
			k, err := c.client().CreateKey(cmd.Context(), req)
			if err != nil {
				return err
			}
			if c.json {
				return marshalJSON(cmd.OutOrStdout(), k)
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.Secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s for tenant %s, scope %s%s; the secret above is shown this once\n",
				k.ID, k.Tenant, k.Scope, expiryText(k.ExpiresAt))
			return nil
		}),
	}
	create.Flags().StringVar(&req.Tenant, "tenant", "", "the tenant whose sessions the key works on")
	create.Flags().StringVar(&req.Scope, "scope", "", "read, run, tenant or admin (each allows what the ones before it do)")
	create.Flags().StringVar(&req.Name, "name", "", "a label for the key")
	create.Flags().StringVar(&expires, "expires", "", "expiry: a duration from now (720h) or an RFC 3339 time; default never")
	_ = create.MarkFlagRequired("tenant")
	_ = create.MarkFlagRequired("scope")

	var tenant string
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List the keys (never their secrets)", Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			keys, err := c.client().ListKeys(cmd.Context(), tenant)
			if err != nil {
				return err
			}
			if c.json {
				return marshalJSON(cmd.OutOrStdout(), map[string]any{"keys": keys})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tSCOPE\tPREFIX\tNAME\tCREATED\tLAST USED\tEXPIRES")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Scope, k.Prefix, dash(k.Name),
					timeText(k.CreatedAt), timePtrText(k.LastUsedAt), timePtrText(k.ExpiresAt))
			}
			return tw.Flush()
		}),
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's keys")

	revoke := &cobra.Command{
		Use: "revoke ID", Short: "Revoke a key: every node refuses it within a second", Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := c.client().RevokeKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			}
			return nil
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// expiryOf reads --expires: a Go duration from now, or an RFC 3339 time.
func expiryOf(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--expires %s: the duration must be positive", s)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--expires %q: give a duration (720h) or an RFC 3339 time (2027-01-01T00:00:00Z)", s)
	}
	return t, nil
}

func expiryText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ", expires " + timeText(*t)
}

func timePtrText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timeText(*t)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

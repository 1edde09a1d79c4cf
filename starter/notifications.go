package main

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
	"github.com/flotilla-gitops/flotilla/internal/temporalx"
)

// notificationStatus is one row of `get notifications`: the resource and
// how its deliveries went.
type notificationStatus struct {
	api.Notification `json:",inline"`
	Status           protocol.DeliveryStats `json:"status"`
}

// listNotifications lists the Notifications of every namespace.
func listNotifications(cmd *cobra.Command, g *globals) error {
	f, _ := g.format() // validated in PersistentPreRunE
	return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
		var list []notificationStatus
		err := temporalx.EachWorkflow(ctx, c, temporalx.RunningOfType(protocol.NotificationsWorkflow), func(id string) error {
			var rec protocol.NotificationsRecord
			if err := query(ctx, c, id, id, &rec); err != nil {
				return err
			}
			list = append(list, notificationRows(rec)...)
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(list, func(i, j int) bool {
			return list[i].Metadata.Namespace+"/"+list[i].Metadata.Name < list[j].Metadata.Namespace+"/"+list[j].Metadata.Name
		})
		return output.Print(cmd.OutOrStdout(), f, list, notificationTable(list))
	})
}

// notificationRows pairs each Notification of rec with its counts.
func notificationRows(rec protocol.NotificationsRecord) []notificationStatus {
	out := make([]notificationStatus, 0, len(rec.Notifications))
	for _, n := range rec.Notifications {
		st := protocol.DeliveryStats{Name: n.Metadata.Name}
		for _, d := range rec.Deliveries {
			if d.Name == n.Metadata.Name {
				st = d
			}
		}
		out = append(out, notificationStatus{Notification: n, Status: st})
	}
	return out
}

func notificationTable(list []notificationStatus) output.Rows {
	rows := output.Rows{Header: []string{"NAMESPACE", "NAME", "PROVIDER", "EVENTS", "SUSPENDED", "DELIVERED", "FAILED", "PENDING", "LAST-ERROR"}}
	for _, n := range list {
		events := "all"
		if len(n.Spec.EventTypes) > 0 {
			ts := make([]string, len(n.Spec.EventTypes))
			for i, t := range n.Spec.EventTypes {
				ts[i] = string(t)
			}
			events = strings.Join(ts, ",")
		}
		rows.Rows = append(rows.Rows, []string{n.Metadata.Namespace, n.Metadata.Name, string(n.Spec.Provider), events,
			strconv.FormatBool(n.Spec.Suspend), strconv.Itoa(n.Status.Delivered), strconv.Itoa(n.Status.Failed),
			strconv.Itoa(n.Status.Pending), n.Status.LastError})
	}
	return rows
}

// notificationArg reads "notification/NAME" (or notifications/).
func notificationArg(arg string) (string, bool) {
	return nameAfter(arg, "notification/", "notifications/")
}

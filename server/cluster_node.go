package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server/cluster"
	"github.com/carryover/carryover/server/httpapi"
	"github.com/carryover/carryover/server/session"
)

// nodeInfo is this server as a cluster node: cluster.node_id (default: <host name>:<port of
// server.addr>, so two nodes on one host differ) and cluster.advertise_addr (default:
// http://<server.addr>). None when the store is not shared.
func nodeInfo(cfg *configs.Config) carryover.NodeInfo {
	if cfg.Store.Driver != "postgres" {
		return carryover.NodeInfo{}
	}
	return carryover.NodeInfo{ID: cfg.ClusterNodeID(), Addr: cfg.ClusterAdvertiseAddr()}
}

// joinCluster makes this server a node of the cluster when its store records ownership (PostgreSQL):
// it heartbeats, then routes session requests through the node, recording in full those it keeps here
// in a full cluster (the service reshapes their refusals through full.Refusal). On SQLite it returns
// front as is.
func joinCluster(ctx context.Context, cfg *configs.Config, store carryover.Store, svc *session.Service, full *cluster.Full,
	auth cluster.Authenticator, front http.Handler, log *slog.Logger, refused func(error)) (*cluster.Node, http.Handler, error) {
	own, ok := store.(carryover.Ownership)
	if !ok || cfg.Store.Driver != "postgres" {
		return nil, front, nil
	}
	token := cfg.Cluster.Token
	if token == "" {
		token = cfg.Auth.Token
	}
	n := cluster.New(cluster.Options{Node: nodeInfo(cfg), Ownership: own, Sessions: svc, Token: token, Logger: log, StatusOf: httpapi.StatusOf, Refused: refused, Full: full,
		Heartbeat: configs.Seconds(cfg.Cluster.HeartbeatSeconds), TTL: configs.Seconds(cfg.Cluster.TTLSeconds)})
	if err := n.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	return n, n.Wrap(front, auth), nil
}

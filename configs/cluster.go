package configs

import (
	"net"
	"os"
)

// ClusterNodeID is this server's node id when it is a node of a cluster (store.driver postgres):
// cluster.node_id, or <host name>:<port of server.addr> so two nodes on one host differ. "" when the
// store is not shared.
func (c *Config) ClusterNodeID() string {
	if c.Store.Driver != "postgres" {
		return ""
	}
	if c.Cluster.NodeID != "" {
		return c.Cluster.NodeID
	}
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(c.Server.Addr)
	return host + ":" + port
}

// ClusterAdvertiseAddr is the URL other nodes proxy to: cluster.advertise_addr, or http://<server.addr>.
func (c *Config) ClusterAdvertiseAddr() string {
	if c.Cluster.AdvertiseAddr != "" {
		return c.Cluster.AdvertiseAddr
	}
	return "http://" + c.Server.Addr
}

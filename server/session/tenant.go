package session

// Visible reports whether tenant may see session id. Unknown ids are "visible" so the front door
// answers its own 404 (or creates them).
func (s *Service) Visible(id, tenant string) bool {
	s.mu.Lock()
	ls, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return true
	}
	doc := ls.docCopy()
	return doc.TenantName() == tenant
}

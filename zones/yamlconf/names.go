package yamlconf

// IsMemberName reports whether s is a member's name as both config files
// write it (a group's members in dnsd's, the mirror's own member key):
// one or more of a-z, 0-9 and "-".
func IsMemberName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

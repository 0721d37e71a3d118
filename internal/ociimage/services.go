package ociimage

import "path/filepath"

// Service is a system service that machined can run from an image: its ID
// (the name of its binary) and the user it runs as.
type Service struct {
	ID   string
	User User
}

// Services are the system services shipped as images, each with a user of
// its own: a uid no host account is likely to hold, the same as its gid.
func Services() []Service {
	return []Service{
		{ID: "apid", User: User{Name: "apid", UID: 52000, GID: 52000}},
		{ID: "trustd", User: User{Name: "trustd", UID: 52001, GID: 52001}},
		{ID: "etcd", User: User{Name: "etcd", UID: 52002, GID: 52002}},
	}
}

// Lookup finds the system service id.
func Lookup(id string) (Service, bool) {
	for _, s := range Services() {
		if s.ID == id {
			return s, true
		}
	}

	return Service{}, false
}

// ImageName is the reference of a system service's image, the same for
// every build: machined tells builds apart by digest.
func ImageName(id string) string { return "aegis.local/system/" + id + ":current" }

// ArchivePath is where dir holds the image archive of service id.
func ArchivePath(dir, id string) string { return filepath.Join(dir, id+".tar") }

package inside

import "openvibe.network/agentsandbox/sandbox/control"

// The files operations beyond put and get: not built yet.

func notYet(op string) control.Done {
	return control.Done{Code: control.CodeInvalid, Error: op + " is not supported by this init yet"}
}

func (s *initServer) list(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	return notYet(req.Op)
}

func (s *initServer) remove(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	return notYet(req.Op)
}

func (s *initServer) mkdir(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	return notYet(req.Op)
}

func (s *initServer) tarGet(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	return notYet(req.Op)
}

func (s *initServer) tarPut(req control.Request, _ *control.Reader, _ *control.Writer) control.Done {
	return notYet(req.Op)
}

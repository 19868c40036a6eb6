"""Who is calling over HTTP: tokens (the tokens file, `MNOTE_TOKEN`, a generated one) or OAuth (an
authorization server's JWTs or introspection), and the gate in front of every endpoint."""

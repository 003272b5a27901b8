"""tau2 itself, as tau2-a2a reaches it: imported in one module, named in one, patched only inside a run.

`imports` is the one module that imports tau2; `distribution` gives every
name of tau2's that tau2-a2a uses, with the half of the seam for the
installed distribution (`nvidia` or `upstream`, each a `protocol.Tau2Seam`);
`hooks` registers tau2-a2a's participants and applies its `patches` while a
run is inside tau2, and restores tau2 after.
"""

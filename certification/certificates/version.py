"""The version of the computation in :mod:`certification.certificates.compute`.

Apart from it so that the services hash inputs and check stored runs against it without loading
the statistics (NumPy, SciPy) into the web process.
"""

#: Bump when the result's layout or any computation changes: it is part of the input hash, so
#: the next refresh recomputes runs made by older code. 2: the ledger's composition boundary
#: states its rule without pointing at a document. 3: coverage variability is tie-aware (ties,
#: tied_split, the simulation's reference and predicted_reason) and the conformal curve marks
#: infinite M* (infinite, covered_unsolvable, curve_infinite). 4: the canonical_ascending tie
#: rule orders numeric classes numerically ("5" before "1000"), then the others as strings. 5: the
#: selective-risk section carries the anytime-valid test of its family (``anytime``).
STATS_VERSION = 5

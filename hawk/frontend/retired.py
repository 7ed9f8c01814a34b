"""Spellings that hawk no longer accepts, each with the form that replaces it.

The messages are kept in one place so that the module-level refusals (``hawk.all_samples``) and the ones found
inside kernel bodies say the same thing.
"""

from __future__ import annotations

ALL_SAMPLES = (
    "hawk.all_samples is gone. Reduce with hawk.sum(x) (likewise hawk.max/min/mean; over=\"<axis>\" keeps the "
    "other lane axes); a masked reduction is hawk.sum(x, where=mask); one row of a matrix is "
    "hawk.sum(m.rows[0]); accumulate by key with hawk.scatter(y)[key] += v; store by key with "
    "hawk.scatter(y)[key] = v; a masked store is y = m.where(mask, v, y); another lane's input is u.at(i)"
)

ALL_SAMPLES_STORE = (
    "hawk.all_samples is gone: store by key with hawk.scatter(y)[key] = v (or add with += v); to keep the old "
    "value where a mask is false write y = m.where(mask, v, y)"
)

ACCUM = "Accum is gone: declare the sink as Mutable[\"bin\":n] and add to it with hawk.scatter(bins)[key] += term"

REDUCE = "Reduce is gone: declare Mutable[Scalar] and assign y = hawk.sum(v) (or hawk.max/min/mean)"

CONTRIBUTE = "'{name}.contribute(v)' is gone: write {name} = hawk.sum(v) (or hawk.max/min/mean)"

ADD_AT = ("'{name}.add(v, at=key)' is gone: write hawk.scatter({name})[key] += v to accumulate by key, or "
          "hawk.scatter({name})[key] = v to store by key")

WRITE_AT = "'{name}.write(v, at=key)' is gone: write hawk.scatter({name})[key] = v"

OWN_SUM = ("{expr}.sum(): a scalar belongs to this lane and has no axis to fold; the sum over the lanes is "
           "hawk.sum({expr})")

SAMPLES_AXIS = ("{expr}.sum(axis='samples') is gone: the sum over every lane is hawk.sum({expr}); over some lane "
                "axes it is hawk.sum({expr}, over=...)")

MODULE_NAMES = {"all_samples": ALL_SAMPLES, "Accum": ACCUM, "Reduce": REDUCE}

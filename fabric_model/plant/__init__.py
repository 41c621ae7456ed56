"""The physical plant: what the fabric is made of, where it stands and what it costs.

From the bottom up (no module imports one above it): ``hardware`` is the resolved parts
record; ``hybrid`` the two fabrics of a hybrid design and their shared tier; ``lines``
prices each part of the bill; ``storage_mgmt`` the storage, front-end and management
networks beside the compute fabric; ``floorplan`` the racks, rows and halls that set the
cable lengths; ``bill`` the bill of a built fabric on resolved parts (totals, power, TCO);
``design`` resolves a scenario's hardware (``fabric.switch = auto`` prices each candidate
through ``bill``) and topology request; ``cost`` is the front door: the bill of materials of
a scenario, and its vendor and fat-tree comparisons.
"""

"""The physical plant: what the fabric is made of, where it stands and what it costs.

``design`` resolves a scenario's hardware and topology request, ``cost`` its bill of
materials, prices, power and TCO, ``floorplan`` the racks, rows and halls that set the cable
lengths, ``storage_mgmt`` the storage, front-end and management networks beside the compute
fabric, and ``hybrid`` the two fabrics of a hybrid design and their shared tier; ``lines``
prices each part of the bill.
"""

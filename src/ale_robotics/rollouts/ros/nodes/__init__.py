"""The graph's nodes: ``sim`` (:mod:`.sim`), ``policy`` (:mod:`.policy`) and ``recorder``
(:mod:`.recorder`), each the ``main`` of a process roslaunch starts with the ros engine's
interpreter, and what they say to each other (:mod:`.wire`). Only :mod:`.wire` is imported
outside a graph: the others import rospy, which exists only there."""

"""Contact: collision geometry (obstacles, self-collision) and the contact laws
(Signorini, Coulomb friction) in compliance space. Pure numpy/scipy, no ROS."""

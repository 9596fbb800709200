"""The worker process: the services' handlers assembled (:mod:`.handlers`) and the workers that
claim and run tasks (:mod:`.runner`)."""

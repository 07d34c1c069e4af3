"""What every request passes through before and after its route: authentication and roles
(``auth``), the body-size limit (``body_limit``) and payload limits (``limits``), request ids
(``request_ids``) and the one RFC 9457 error shape (``problems``).
"""

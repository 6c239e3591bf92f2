"""The one domain error of the curation app; views and the API turn it into 400 responses."""


class IngestError(Exception):
    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.message = message
        self.code = code

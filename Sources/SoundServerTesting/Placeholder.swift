public enum SoundServerTestingPlaceholder {}
